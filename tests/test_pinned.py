"""Pinned host memory and non-blocking copies.

A non_blocking copy returns before it has run exactly when the host side is
pinned memory from torch_infini's allocator and the provider reports both
``async_copy`` and ``pinned_memory``; every other copy has completed when it
returns. The test hook ``_test_enqueue_delay`` holds a stream busy so that
"has not run yet" is observable, not a race.
"""

from __future__ import annotations

import pytest
import torch

import torch_infini
from infini_testing import hold

CAPS = torch_infini.diagnostics()["capabilities"]
ASYNC = CAPS["async_copy"] and CAPS["pinned_memory"]


def test_pin_memory_and_is_pinned():
    t = torch.arange(1000, dtype=torch.float32)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.is_pinned()
    assert p.device.type == "cpu"
    torch.testing.assert_close(p, t, rtol=0, atol=0)
    # A view into pinned memory is pinned too; a fresh CPU tensor is not.
    assert p[10:20].is_pinned()
    assert not torch.empty(10).is_pinned()


def test_storage_pin_memory():
    s = torch.arange(16, dtype=torch.int32).untyped_storage()
    pinned = s.pin_memory()
    assert pinned.is_pinned()
    assert bytes(pinned) == bytes(s)


def test_empty_pin_memory_true():
    t = torch.empty(64, pin_memory=True)
    assert t.is_pinned()


@pytest.mark.skipif(not ASYNC, reason="provider has no asynchronous pinned copies")
def test_non_blocking_h2d_from_pinned_returns_before_the_copy_runs():
    stream = torch.infini.current_stream()
    src = torch.arange(1 << 16, dtype=torch.float32).pin_memory()
    dst = torch.empty(1 << 16, device="infini")
    hold(stream, 200)
    dst.copy_(src, non_blocking=True)
    assert not stream.query(), "a pinned non_blocking copy must be queued, not done"
    stream.synchronize()
    torch.testing.assert_close(dst.cpu(), src, rtol=0, atol=0)


@pytest.mark.skipif(not ASYNC, reason="provider has no asynchronous pinned copies")
def test_non_blocking_d2h_into_pinned_returns_before_the_copy_runs():
    stream = torch.infini.current_stream()
    expected = torch.arange(4096, dtype=torch.int64)
    src = expected.to("infini")
    dst = torch.empty(4096, dtype=torch.int64).pin_memory()
    hold(stream, 200)
    dst.copy_(src, non_blocking=True)
    assert not stream.query()
    torch.infini.synchronize()
    torch.testing.assert_close(dst, expected, rtol=0, atol=0)


def test_non_blocking_from_pageable_memory_is_complete_on_return():
    stream = torch.infini.current_stream()
    src = torch.arange(1 << 16, dtype=torch.float32)
    dst = torch.empty(1 << 16, device="infini")
    try:
        hold(stream, 100)
    except pytest.skip.Exception:
        pass  # without the hook the copy is still checked for completeness
    dst.copy_(src, non_blocking=True)
    # Pageable memory may change the moment we return: the copy must be done.
    assert stream.query()
    src.fill_(-1)
    torch.testing.assert_close(dst.cpu(), torch.arange(1 << 16, dtype=torch.float32), rtol=0, atol=0)


def test_non_blocking_d2h_into_pageable_memory_is_complete_on_return():
    expected = torch.arange(1000, dtype=torch.float32)
    src = expected.to("infini")
    dst = torch.empty(1000)
    dst.copy_(src, non_blocking=True)
    assert torch.infini.current_stream().query()
    torch.testing.assert_close(dst, expected, rtol=0, atol=0)


def test_dropping_both_tensors_after_non_blocking_h2d_is_safe():
    """Pinned blocks are reused only after the copies that read them ran: each
    iteration's source is dropped at once and its block is handed out again
    while earlier copies may still be queued."""
    stream = torch.infini.current_stream()
    n = 4096
    acc = torch.zeros(n).to("infini")
    try:
        hold(stream, 50)
    except pytest.skip.Exception:
        pass
    iterations = 300
    for i in range(iterations):
        src = torch.full((n,), float(i)).pin_memory()
        dev = torch.empty(n, device="infini")
        dev.copy_(src, non_blocking=True)
        del src
        acc.add_(dev)
        del dev
    torch.infini.synchronize()
    expected = float(sum(range(iterations)))
    torch.testing.assert_close(acc.cpu(), torch.full((n,), expected), rtol=0, atol=0)


def test_dropping_device_source_after_non_blocking_d2h_is_safe():
    """The device block a pending D2H copy reads is not reused before it ran."""
    stream = torch.infini.current_stream()
    n = 2048
    try:
        hold(stream, 50)
    except pytest.skip.Exception:
        pass
    outs = []
    for i in range(200):
        dev = torch.full((n,), float(i)).to("infini", non_blocking=False)
        host = torch.empty(n).pin_memory()
        host.copy_(dev, non_blocking=True)
        del dev
        # Reuse the freed device memory at once on the same stream.
        scratch = torch.full((n,), -1.0).to("infini")
        del scratch
        outs.append(host)
    torch.infini.synchronize()
    for i, host in enumerate(outs):
        assert torch.equal(host, torch.full((n,), float(i))), f"iteration {i} corrupted"


@pytest.mark.skipif(not ASYNC, reason="provider has no asynchronous pinned copies")
def test_non_blocking_copy_on_a_side_stream_overlaps_with_other_streams():
    side = torch.infini.Stream()
    main = torch.infini.current_stream()
    src = torch.arange(1024, dtype=torch.float32).pin_memory()
    dst = torch.empty(1024, device="infini")
    hold(side, 200)
    with torch.infini.stream(side):
        dst.copy_(src, non_blocking=True)
    # The main stream is free while the side stream still holds the copy.
    assert main.query()
    assert not side.query()
    main.wait_stream(side)
    torch.testing.assert_close(dst.cpu(), src, rtol=0, atol=0)


class _Squares(torch.utils.data.Dataset):
    def __len__(self) -> int:
        return 32

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((8,), float(i * i))


def test_dataloader_pin_memory_device_infini():
    loader = torch.utils.data.DataLoader(_Squares(), batch_size=8, pin_memory=True, pin_memory_device="infini")
    seen = 0
    for batch_index, batch in enumerate(loader):
        assert batch.is_pinned()
        on_device = batch.to("infini", non_blocking=True)
        torch.infini.synchronize()
        expected = torch.stack([torch.full((8,), float(i * i)) for i in range(batch_index * 8, batch_index * 8 + 8)])
        torch.testing.assert_close(on_device.cpu(), expected, rtol=0, atol=0)
        seen += batch.shape[0]
    assert seen == 32


def test_diagnostics_report_copy_capabilities():
    caps = torch_infini.diagnostics()["capabilities"]
    assert isinstance(caps["async_copy"], bool) and isinstance(caps["pinned_memory"], bool)
    if torch_infini.diagnostics()["provider"] == "host":
        assert caps["async_copy"] and caps["pinned_memory"]
