"""PyTorch's ModuleInfo database on infini, CPU PyTorch as the oracle.

Every module of ``common_modules.module_db``, in float32 and bfloat16, in
training mode (and eval mode where the two differ), the first
``SAMPLES_PER_CASE`` samples of each case: outputs,
input and parameter gradients and buffers, bit for bit (see
``module_db_harness``). Every case passes, except the reviewed list in
``module_known_failures``, whose cases must still fail (and, on the Infini
stack, its list of cases the stack rounds otherwise). On the Infini stack,
where InfiniOps serves some operators and refuses the rest, a refused case
skips with the refusal (tests/conftest.py).
"""

from __future__ import annotations

import pytest

import module_db_harness as harness
from infini_testing import on_host
from module_known_failures import KNOWN_FAILURES, STACK_KNOWN_FAILURES


def _params():
    params = []
    for info, dtype, mode in harness.cases():
        cid = harness.case_id(info, dtype, mode)
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN_FAILURES[cid])] if cid in KNOWN_FAILURES else []
        if not on_host() and cid in STACK_KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=False, reason=STACK_KNOWN_FAILURES[cid]))
        params.append(pytest.param(info, dtype, mode, id=cid, marks=marks))
    return params


@pytest.mark.parametrize("info,dtype,mode", _params())
def test_module_db(info, dtype, mode):
    outcome = harness.run_case(info, dtype, mode)
    assert outcome.samples > 0, "no sample ran"


def test_known_failures_are_real_cases():
    ids = {harness.case_id(*case) for case in harness.cases()}
    stale = sorted((set(KNOWN_FAILURES) | set(STACK_KNOWN_FAILURES)) - ids)
    assert not stale, f"known failures that are no ModuleInfo case: {stale}"
