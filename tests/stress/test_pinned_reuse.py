"""Stress: the pinned host allocator's reuse of buffers that non_blocking
copies still read or write, and its bookkeeping for long-lived buffers."""

from __future__ import annotations

import gc

import pytest
import torch

import torch_infini
from infini_testing import hold
from stress_helpers import rss_bytes

DEV = torch.device("infini:0")
CAPS = torch_infini.diagnostics()["capabilities"]
ASYNC = CAPS["async_copy"] and CAPS["pinned_memory"]


@pytest.mark.skipif(not ASYNC, reason="needs asynchronous copies from pinned memory")
def test_pinned_buffers_freed_under_pending_copies_are_not_reused_early():
    """Host -> device: the source buffer is freed while its copy is queued
    behind a hold; the next pinned buffer of the same size must not be that
    block until the copy ran, or the copy would read the new contents."""
    n = 4096
    s = torch.infini.Stream()
    results, expected = [], []
    with torch.infini.stream(s):
        for i in range(400):
            if i % 50 == 0:
                hold(s, 5)
            src = torch.full((n,), float(i), pin_memory=True)
            dst = src.to(DEV, non_blocking=True)
            del src
            scribble = torch.empty(n, pin_memory=True)
            scribble.fill_(-1.0)  # overwrites src if its block came back early
            results.append(dst)
            expected.append(float(i))
            del scribble
    s.synchronize()
    for dst, value in zip(results, expected):
        assert torch.equal(dst.cpu(), torch.full((n,), value)), value


@pytest.mark.skipif(not ASYNC, reason="needs asynchronous copies to pinned memory")
def test_device_to_pinned_copies_into_reused_buffers():
    """Device -> host into pinned buffers, then reused once the stream says so."""
    n = 2048
    s = torch.infini.Stream()
    got = []
    with torch.infini.stream(s):
        for i in range(300):
            dev = torch.full((n,), float(i), device=DEV) * 3
            host = torch.empty(n, pin_memory=True)
            host.copy_(dev, non_blocking=True)
            event = torch.infini.Event()
            event.record()
            got.append((host, event, float(i) * 3))
    for host, event, value in got:
        event.synchronize()
        assert torch.equal(host, torch.full((n,), value)), value


@pytest.mark.skipif(not ASYNC, reason="needs asynchronous copies from pinned memory")
def test_one_long_lived_pinned_buffer_keeps_bounded_bookkeeping():
    """Issue 22 item 6: 60,000 non_blocking copies from one pinned buffer kept
    one event each (about 210 bytes of host memory per copy) until the buffer
    was freed; now a buffer keeps one event per stream it was copied on."""
    src = torch.arange(16, dtype=torch.float32).pin_memory()
    dst = torch.empty(16, device=DEV)
    streams = [torch.infini.current_stream(), torch.infini.Stream()]

    def copies(count):
        for i in range(count):
            with torch.infini.stream(streams[i % 2]):
                dst.copy_(src, non_blocking=True)
        for st in streams:
            st.synchronize()

    copies(5_000)  # warm up caches and allocator arenas
    gc.collect()
    before = rss_bytes()
    copies(60_000)
    grown = rss_bytes() - before
    assert torch.equal(dst.cpu(), torch.arange(16, dtype=torch.float32))
    assert grown < 4 * 2**20, f"RSS grew {grown / 2**20:.1f} MiB over 60,000 copies"


@pytest.mark.skipif(not ASYNC, reason="needs asynchronous copies from pinned memory")
def test_pinned_buffer_used_on_many_streams_is_reused_after_all_of_them():
    n = 1024
    streams = [torch.infini.Stream() for _ in range(4)]
    for round_ in range(50):
        src = torch.full((n,), float(round_), pin_memory=True)
        outs = []
        for k, st in enumerate(streams):
            if round_ % 10 == 0:
                hold(st, 2 * k + 1)
            with torch.infini.stream(st):
                outs.append(src.to(DEV, non_blocking=True))
        del src
        torch.full((n,), -5.0, pin_memory=True)  # must not be src's block yet
        for st, out in zip(streams, outs):
            st.synchronize()
            assert torch.equal(out.cpu(), torch.full((n,), float(round_)))
