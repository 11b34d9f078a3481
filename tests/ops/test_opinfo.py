"""PyTorch's OpInfo database on infini, CPU PyTorch as the oracle.

Every (OpInfo, dtype) pair CPU supports runs forward in float32, bfloat16,
int64 and complex64, and backward in float32 and bfloat16 (the first
``SAMPLES_PER_CASE`` samples of each; see ``opinfo_harness``). Every case
passes, except the reviewed list in ``opinfo_known_failures``, whose cases
must still fail (strict; a few that fail on some runs only are marked
unstable there). On the Infini stack, where InfiniOps runs a few
operators and refuses the rest, a refused case skips with the refusal
(tests/conftest.py), and the cases it sums in another order past their
tolerance are listed apart (``STACK_KNOWN_FAILURES``); everything runs on
the host runtime.
"""

from __future__ import annotations

import pytest

import opinfo_harness as harness
from infini_testing import on_host
from opinfo_known_failures import KNOWN_FAILURES, OPINFO_SINCE, STACK_KNOWN_FAILURES, UNSTABLE
from torch_release_known_failures import release, running_release


def _params():
    params = []
    for op, dtype, direction in harness.cases():
        cid = harness.case_id(op, dtype, direction)
        marks = []
        if cid in KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=cid not in UNSTABLE, reason=KNOWN_FAILURES[cid]))
        if not on_host() and cid in STACK_KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=False, reason=STACK_KNOWN_FAILURES[cid]))
        params.append(pytest.param(op, dtype, direction, id=cid, marks=marks))
    return params


@pytest.mark.parametrize("op,dtype,direction", _params())
def test_opinfo(op, dtype, direction):
    outcome = harness.run_case(op, dtype, direction)
    assert outcome.samples > 0 or not list(op.sample_inputs_func(op, "cpu", dtype, direction == "backward")), \
        "no sample ran"


def test_known_failures_are_real_cases():
    ids = {harness.case_id(*case) for case in harness.cases()}
    not_yet = {cid for cid, since in OPINFO_SINCE.items() if running_release() < release(since)}
    stale = sorted((set(KNOWN_FAILURES) | set(STACK_KNOWN_FAILURES)) - ids - not_yet)
    assert not stale, f"known failures that are no OpInfo case: {stale}"
