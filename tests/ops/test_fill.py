"""fill_, zero_ and the factories built on them (zeros, ones, full, *_like) on
infini against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch

from infini_testing import sample

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int32,
          torch.int64, torch.uint8, torch.bool]
IDS = [str(d).removeprefix("torch.") for d in DTYPES]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_factories_match_cpu(dtype):
    for make in (torch.zeros, torch.ones):
        d = make(2, 3, dtype=dtype, device="infini")
        c = make(2, 3, dtype=dtype)
        assert d.device.type == "infini" and d.dtype == c.dtype and d.stride() == c.stride()
        assert torch.equal(d.cpu(), c)
    value = True if dtype == torch.bool else 3
    assert torch.equal(torch.full((4,), value, dtype=dtype, device="infini").cpu(),
                       torch.full((4,), value, dtype=dtype))
    x = sample((3, 2), dtype)
    dx = x.to("infini")
    for like, cpu_like in ((torch.zeros_like(dx), torch.zeros_like(x)), (torch.ones_like(dx), torch.ones_like(x)),
                           (torch.full_like(dx, value), torch.full_like(x, value))):
        assert torch.equal(like.cpu(), cpu_like)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=str)
def test_fill_strided_views_leaves_the_rest(dtype):
    x = sample((4, 6), dtype)
    d = x.to("infini")
    x.t()[1:, ::2].fill_(5)
    d.t()[1:, ::2].fill_(5)
    assert torch.equal(d.cpu(), x)
    x[1:3].zero_()
    d[1:3].zero_()
    assert torch.equal(d.cpu(), x)


def test_fill_tensor_value_from_device_and_cpu():
    d = torch.empty(5, device="infini")
    d.fill_(torch.tensor(2.5).to("infini"))
    assert torch.equal(d.cpu(), torch.full((5,), 2.5))
    d.fill_(torch.tensor(-1.0))
    assert torch.equal(d.cpu(), torch.full((5,), -1.0))
    with pytest.raises(RuntimeError, match="0-dimension"):
        d.fill_(torch.ones(2).to("infini"))


def test_fill_checks_overflow_at_the_call_like_cpu():
    with pytest.raises(RuntimeError, match="overflow") as cpu_err:
        torch.zeros(2, dtype=torch.uint8).fill_(300)
    with pytest.raises(RuntimeError, match="overflow") as dev_err:
        torch.zeros(2, dtype=torch.uint8, device="infini").fill_(300)
    assert str(dev_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]


def test_fill_empty_and_queued_in_order():
    e = torch.empty(0, device="infini")
    assert e.fill_(1).numel() == 0
    d = torch.zeros(1000, device="infini")
    for i in range(20):
        d.fill_(i)
        d.add_(d)
    assert torch.equal(d.cpu(), torch.full((1000,), 38.0))
