"""PyTorch's optimizer database on infini, CPU PyTorch as the oracle: every
configuration optim_db yields for the device, with the default, foreach,
fused and differentiable implementations where supported, several steps,
parameters and optimizer state bit for bit (see ``optim_db_harness``).
SparseAdam, which only takes sparse gradients, is tested apart: on the host
runtime it trains as on the CPU, and the Infini stack refuses it."""

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


def test_sparse_adam_trains_as_on_cpu_or_is_refused_on_the_stack():
    """SparseAdam takes the sparse gradients of embedding(sparse=True): on the
    host runtime they train as on the CPU, bit for bit; the Infini stack
    (InfiniOps has no sparse kernels) refuses where the gradient is made."""
    steps = []
    for dev in ("cpu", harness.DEV):
        torch.manual_seed(0)
        p = torch.randn(6, 3, device=dev, requires_grad=True)
        opt = torch.optim.SparseAdam([p], lr=0.1)
        if dev != "cpu" and not on_host():
            with pytest.raises(NotImplementedError, match="sparse|index_select"):
                torch.nn.functional.embedding(torch.tensor([1, 2, 4], device=dev), p, sparse=True).sum().backward()
                opt.step()
            return
        for _ in range(3):
            opt.zero_grad()
            torch.nn.functional.embedding(torch.tensor([1, 2, 4, 2], device=dev), p, sparse=True).pow(2).sum().backward()
            opt.step()
        steps.append(p.detach().cpu())
    assert torch.equal(steps[1], steps[0])
