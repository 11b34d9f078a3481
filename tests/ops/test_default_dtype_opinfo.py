"""A sample of OpInfo under ``torch.set_default_dtype(torch.float64)``, each
case run first under float32, the default, then again under float64: a
cached decision that did not key the default dtype answers the second run
with the first run's dtypes. CPU PyTorch under the same default is the
oracle (opinfo_harness compares values, dtypes and strides).

The sample: every fourth (OpInfo, dtype) forward case in int64 and float32,
the dtypes whose results the default dtype decides (int64 / int64, an
integer tensor with a float scalar) or that factories and scalars meet.
"""

from __future__ import annotations

import pytest
import torch

import opinfo_harness as harness
from opinfo_known_failures import KNOWN_FAILURES

SAMPLED_DTYPES = (torch.int64, torch.float32)
EVERY = 4


def _params():
    cases = [(op, dtype) for op, dtype, direction in harness.cases()
             if direction == "forward" and dtype in SAMPLED_DTYPES
             and harness.case_id(op, dtype, direction) not in KNOWN_FAILURES]
    return [pytest.param(op, dtype, id=harness.case_id(op, dtype, "forward"))
            for op, dtype in cases[::EVERY]]


@pytest.mark.parametrize("op,dtype", _params())
def test_opinfo_after_set_default_dtype(op, dtype):
    harness.run_case(op, dtype, "forward")
    was = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        harness.run_case(op, dtype, "forward")
    finally:
        torch.set_default_dtype(was)
