"""When an error is raised depends on where CUDA checks the values, never on
whether a call of the same kind ran before (csrc/ops/aten/aten_registry.cpp's
table):

- checked on the host before anything is launched (segment_reduce's lengths;
  CPU and CUDA both read them there): raised at the call, every call;
- checked in the kernel (CUDA's device-side asserts: an index out of range):
  raised at the next synchronization, naming the operator, every call, the
  first of its kind included;
- TORCH_INFINI_LAUNCH_BLOCKING=1, as CUDA_LAUNCH_BLOCKING=1: every error at
  its call.
"""

from __future__ import annotations

import pytest
import torch

from conftest import run_python
from infini_testing import DEV, drain_async_errors, on_host

pytestmark = pytest.mark.skipif(not on_host(), reason="the host runtime's queue decides the timing")


@pytest.fixture(autouse=True)
def _no_error_left_behind():
    drain_async_errors()
    yield
    drain_async_errors()


def segment_sum(lengths):
    data = torch.arange(10.0, device=DEV).reshape(5, 2)
    return torch._segment_reduce(data, "sum", lengths=lengths.to(DEV), unsafe=False)


def test_a_host_side_check_raises_at_the_call_after_a_valid_call():
    good, bad = torch.tensor([2, 3]), torch.tensor([6, -1])
    data = torch.arange(10.0).reshape(5, 2)
    torch.testing.assert_close(segment_sum(good).cpu(), torch._segment_reduce(data, "sum", lengths=good))
    with pytest.raises(RuntimeError) as cpu:
        torch._segment_reduce(data, "sum", lengths=bad, unsafe=False)
    for _ in range(2):
        with pytest.raises(RuntimeError, match=str(cpu.value).splitlines()[0]):
            segment_sum(bad)  # no synchronization: raised at the call
    torch.infini.synchronize()  # nothing left pending


@pytest.mark.parametrize("valid_first", [False, True], ids=["first_call_of_its_kind", "after_a_valid_call"])
@pytest.mark.parametrize("name, call", [
    ("aten::index_select", lambda x, i: x.index_select(0, i)),
    ("aten::gather", lambda x, i: x.gather(0, i.unsqueeze(1).expand(-1, x.shape[1]))),
    # embedding runs as index_select (its composite), the operator that fails
    ("aten::index_select", lambda x, i: torch.nn.functional.embedding(i, x)),
    ("aten::max_unpool2d", lambda x, i: torch.nn.functional.max_unpool2d(
        x.reshape(1, 1, *x.shape), i.reshape(1, 1, 1, -1).expand(1, 1, x.shape[0], -1)[..., :x.shape[1]].contiguous(),
        kernel_size=2)),
])
def test_a_device_side_check_raises_at_the_next_synchronization_every_time(name, call, valid_first):
    rows = 7 if valid_first else 5 + hash(name) % 50  # a shape no other test used: a first call of its kind
    x = torch.arange(rows * 3.0, device=DEV).reshape(rows, 3)
    if valid_first:
        call(x, torch.zeros(3, dtype=torch.long, device=DEV))
        torch.infini.synchronize()
    bad = torch.tensor([0, 10**6, 1], device=DEV)
    call(x, bad)  # returns: the values are read where the kernel runs
    with pytest.raises(RuntimeError, match=rf"{name}(\.\w+)?: .*(out of range|out of bounds|invalid)"):
        torch.infini.synchronize()


LAUNCH_BLOCKING = """
    import torch, torch_infini
    x = torch.arange(12.0, device='infini').reshape(4, 3)
    x.index_select(0, torch.tensor([0, 1], device='infini'))
    try:
        x.index_select(0, torch.tensor([0, 99], device='infini'))
    except Exception as e:
        print('at the call:', type(e).__name__, 'out of range' in str(e))
    else:
        print('returned')
    data = torch.arange(10.0, device='infini').reshape(5, 2)
    try:
        torch._segment_reduce(data, 'sum', lengths=torch.tensor([6, -1], device='infini'), unsafe=False)
    except RuntimeError as e:
        print('at the call:', type(e).__name__, True)
"""


def test_launch_blocking_raises_every_error_at_its_call():
    result = run_python(LAUNCH_BLOCKING, env={"TORCH_INFINI_LAUNCH_BLOCKING": "1"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[:2] == ["at the call: RuntimeError True", "at the call: RuntimeError True"]
    queued = run_python(LAUNCH_BLOCKING, env={"TORCH_INFINI_LAUNCH_BLOCKING": "0"})
    assert queued.stdout.split("\n")[0] == "returned", queued.stdout + queued.stderr[-2000:]
