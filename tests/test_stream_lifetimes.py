"""Lifetimes across streams: memory used by work still queued on a stream is
never handed out again before that work finishes, and freeing never blocks
the host.

A tensor freed on its own stream is reused at once on that stream (stream
order makes it safe); memory a tensor shares with another stream is protected
by ``Tensor.record_stream``. Streams are held busy with the private hook
``_test_enqueue_delay``, so each test would fail on a synchronous runtime.
"""

from __future__ import annotations

import gc
import time

import pytest
import torch

import torch_infini
from infini_testing import hold

N = 1 << 18  # 1 MiB of float32
# An odd large size (41 MiB) that no other test uses: its block is a whole
# segment, so a same-size request on the same stream gets exactly that block.
BIG = (41 << 20) // 4




def values(scale: float = 1.0) -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32) * scale


def test_record_stream_keeps_freed_memory_until_the_reading_stream_finishes(device):
    x = values().to(device)  # allocated on the default stream
    old_ptr = x.data_ptr()
    side = torch.infini.Stream()
    hold(side, 2000)
    with torch.infini.stream(side):
        y = x + x  # reads x on `side`, behind the delay
    x.record_stream(side)
    del x  # returns at once; the block waits for `side`
    # Not a timing: had freeing waited for `side`, `side` would be idle now.
    assert not side.query(), "freeing blocked the host on the stream"
    z = torch.empty(N, dtype=torch.float32, device=device)  # same size, default stream
    z.copy_(torch.full((N,), 7.0))
    reused_while_pending = z.data_ptr() == old_ptr and not side.query()
    side.synchronize()
    assert not reused_while_pending, "the freed block was handed out while `side` still read it"
    with torch.infini.stream(side):
        assert torch.equal(y.cpu(), values(2))
    assert torch.equal(z.cpu(), torch.full((N,), 7.0))


def test_record_stream_accepts_generic_streams_and_is_idempotent(device):
    x = values().to(device)
    generic = torch.Stream("infini")
    x.record_stream(generic)
    x.record_stream(generic)
    x.record_stream(torch.infini.current_stream())  # its own stream: nothing to do
    del x


def test_record_stream_block_returns_to_the_pool_after_the_stream_finishes(device):
    # The statistics below must move by this test's free only: earlier
    # tests' garbage (freed whenever the collector runs) and work they left
    # queued (which releases its tensors when it runs) must be gone first.
    gc.collect()
    torch.infini.synchronize()
    side = torch.infini.Stream()
    x = values().to(device)
    hold(side, 200)
    with torch.infini.stream(side):
        y = x + x
    x.record_stream(side)
    allocated = torch.infini.memory_allocated()
    del x
    assert torch.infini.memory_allocated() == allocated - N * 4  # freed at once for the stats
    side.synchronize()
    with torch.infini.stream(side):
        assert torch.equal(y.cpu(), values(2))
    # Once `side` is done, the block is reusable on its own stream again.
    z = torch.empty(N, dtype=torch.float32, device=device)
    z.copy_(values(5))
    assert torch.equal(z.cpu(), values(5))


def test_free_does_not_block_the_host_and_same_stream_reuse_is_ordered(device):
    default = torch.infini.default_stream()
    base = torch.arange(BIG, dtype=torch.float32)
    x = base.to(device)
    old_ptr = x.data_ptr()
    hold(default, 2000)
    y = x + x  # queued on the default stream, behind the delay
    del x
    # Had freeing waited for the stream, the stream would be idle now.
    assert default.query() is False, "freeing waited for the stream"
    # A block freed on a stream is reused at once on it; that is safe because
    # the copy below is queued after the add that still reads the block.
    z = torch.empty(BIG, dtype=torch.float32, device=device)
    assert z.data_ptr() == old_ptr
    z.copy_(torch.full((BIG,), -3.0))
    assert torch.equal(y.cpu(), base * 2)
    assert torch.equal(z.cpu(), torch.full((BIG,), -3.0))


def test_block_freed_on_a_busy_stream_is_not_given_to_another_stream(device):
    side = torch.infini.Stream()
    with torch.infini.stream(side):
        x = values().to(device)  # allocated on `side`
        old_ptr = x.data_ptr()
        hold(side, 400)
        y = x + x
        del x  # back to side's pool; `side` still reads it
    assert side.query() is False
    z = torch.empty(N, dtype=torch.float32, device=device)  # the default stream
    assert z.data_ptr() != old_ptr
    z.copy_(torch.full((N,), 9.0))
    side.synchronize()
    with torch.infini.stream(side):
        assert torch.equal(y.cpu(), values(2))
    assert torch.equal(z.cpu(), torch.full((N,), 9.0))


def test_reuse_on_the_freeing_stream_is_stream_ordered(device):
    side = torch.infini.Stream()
    base = torch.arange(BIG, dtype=torch.float32)
    with torch.infini.stream(side):
        x = base.to(device)
        hold(side, 300)
        y = x + x
        old_ptr = x.data_ptr()
        del x
        w = torch.empty(BIG, dtype=torch.float32, device=device)
        assert w.data_ptr() == old_ptr
        w.copy_(-base)  # overwrites x's memory, after the add in stream order
        assert torch.equal(y.cpu(), base * 2)
        assert torch.equal(w.cpu(), -base)


def test_temporaries_of_queued_work_stay_valid(device):
    """Intermediate tensors freed by Python while their work is queued."""
    side = torch.infini.Stream()
    base = values()
    with torch.infini.stream(side):
        x = base.to(device)
        hold(side, 200)
        out = ((x + x) + x) + x  # three temporaries, freed before they run
        assert side.query() is False
        assert torch.equal(out.cpu(), base * 4)
