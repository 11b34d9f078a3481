"""fill_, zero_ and the factories built on them (zeros, ones, full, *_like) on
infini against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch

from infini_testing import fills_on_device, sample

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


@pytest.mark.skipif(not fills_on_device(), reason="no fill kernel or InfiniOps Fill in this build: fills copy a host "
                                                "buffer from pageable memory, which waits for the stream")
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_fills_queue_without_waiting_for_the_stream(dtype):
    """torch.zeros/ones/full, fill_ of a strided view and zero_ run on the
    device, so the synchronization debug mode has nothing to refuse (a
    host-prepared buffer from pageable memory would wait for the stream on
    every call: a stall per torch.zeros on an accelerator). The values are
    CPU's: an integer as it converts to the dtype (-3 as uint8 is 253, any
    nonzero number as bool is True)."""
    x = sample((4, 6), dtype)
    d = x.to("infini")
    values = [0, 1, 2.5, -3] if dtype != torch.uint8 else [0, 1, 2.5, -3, 255]
    was = torch.infini.get_sync_debug_mode()
    torch.infini.set_sync_debug_mode("error")
    try:
        made = [(torch.full((3, 5), v, dtype=dtype, device="infini"), torch.full((3, 5), v, dtype=dtype))
                for v in values]
        made.append((torch.zeros(2, 3, dtype=dtype, device="infini"), torch.zeros(2, 3, dtype=dtype)))
        d.t()[1:, ::2].fill_(5)
        d[1:3].zero_()
    finally:
        torch.infini.set_sync_debug_mode(was)
    x.t()[1:, ::2].fill_(5)
    x[1:3].zero_()
    for got, expected in made + [(d, x)]:
        assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


def test_a_fill_with_an_integer_a_double_cannot_hold_is_exact():
    """InfiniOps' Fill takes its value as a double: an integer from 2^53 on
    goes through a host buffer instead, converted once, as CPU converts
    it (a double of it converted again could round otherwise)."""
    for value in (2**60 + 1, -(2**53) - 3, 2**53 + 1):
        for dtype in (torch.int64, torch.float64, torch.float32):
            got = torch.full((3,), value, dtype=dtype, device="infini")
            assert torch.equal(got.cpu(), torch.full((3,), value, dtype=dtype)), (value, dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_new_memory_filled_under_deterministic_algorithms_as_cpu(dtype):
    """torch.empty fills new memory (NaN, or the dtype's largest value)
    under deterministic algorithms: a fill that allocated through at::empty
    would come back to itself."""
    was, was_fill = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        got, expected = torch.empty(2, 3, dtype=dtype, device="infini"), torch.empty(2, 3, dtype=dtype)
    finally:
        torch.use_deterministic_algorithms(was)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill
    assert torch.equal(got.cpu(), expected) or (dtype.is_floating_point and got.cpu().isnan().all() and expected.isnan().all())
