"""PyTorch's optimizer database on infini, CPU PyTorch as the oracle: every
configuration optim_db yields for the device, with the default, foreach,
fused and differentiable implementations where supported, several steps,
parameters and optimizer state bit for bit (see ``optim_db_harness``).
SparseAdam, which only takes sparse gradients, is refused (sparse layouts
are not supported on infini): that refusal is tested too."""

from __future__ import annotations

import pytest
import torch

import optim_db_harness as harness
from infini_testing import on_host
from optim_known_failures import STACK_KNOWN_FAILURES


def _params():
    params = []
    for info, optim_input, impl in harness.cases():
        cid = harness.case_id(info, optim_input, impl)
        marks = []
        if not on_host() and cid in STACK_KNOWN_FAILURES:
            marks.append(pytest.mark.xfail(strict=False, reason=STACK_KNOWN_FAILURES[cid]))
        params.append(pytest.param(info, optim_input, impl, id=cid, marks=marks))
    return params


@pytest.mark.parametrize("info,optim_input,impl", _params())
def test_optim_db(info, optim_input, impl):
    assert harness.run_case(info, optim_input, impl) == harness.STEPS


def test_stack_known_failures_are_real_cases():
    ids = {harness.case_id(*case) for case in harness.cases()}
    assert not sorted(set(STACK_KNOWN_FAILURES) - ids)


def test_sparse_adam_is_refused_naming_sparse_layouts():
    """Its sparse gradient is refused where it is made, naming sparse layouts."""
    p = torch.zeros(4, 3, device=harness.DEV, requires_grad=True)
    opt = torch.optim.SparseAdam([p])
    # On an Infini stack without index_select (InfiniOps built WITH_TORCH=OFF), embedding's is refused first.
    refusal = "sparse layouts are not supported on the infini device"
    if not on_host():
        refusal += "|index_select"
    with pytest.raises(NotImplementedError, match=refusal):
        torch.nn.functional.embedding(torch.tensor([1, 2], device=harness.DEV), p, sparse=True).sum().backward()
        opt.step()
