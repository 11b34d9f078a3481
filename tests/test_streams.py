"""torch.infini.Stream and the current-stream API on the asynchronous host
runtime, with torch.cuda's semantics.

Every ordering test holds a stream busy with the private test hook
``torch_infini._C._test_enqueue_delay`` so that the pending state is certain;
each of them would fail on a runtime that runs work synchronously.
"""

from __future__ import annotations

import pytest
import torch

import torch_infini
from infini_testing import hold

N = 1 << 15




def values(scale: float = 1.0) -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32) * scale


def same_stream(a: torch.Stream, b: torch.Stream) -> bool:
    """Whether two stream objects, of any Stream class, name the same stream.

    (Like torch.cuda.Stream, torch.infini.Stream compares equal only to
    streams of its own class.)"""
    return (a.stream_id, a.device_index, a.device_type) == (b.stream_id, b.device_index, b.device_type)


# --- construction, identity, priority -------------------------------------------------


def test_stream_subclasses_torch_stream(device):
    s = torch.infini.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == device
    assert s.device_type == torch.infini.default_stream().device_type
    assert s.stream_id != torch.infini.default_stream().stream_id
    assert "infini" in repr(s)


@pytest.mark.parametrize("spelling", [None, 0, "infini", "infini:0", torch.device("infini:0")])
def test_stream_device_argument_spellings(spelling, device):
    assert torch.infini.Stream(device=spelling).device == device
    assert torch.infini.current_stream(spelling) == torch.infini.current_stream()
    assert torch.infini.default_stream(spelling) == torch.infini.default_stream()


def test_stream_on_a_missing_device_raises():
    with pytest.raises(RuntimeError, match="Invalid device index"):
        torch.infini.Stream(device=torch.infini.device_count())


def test_priorities_and_clamping():
    assert torch.infini.Stream().priority == 0
    assert torch.infini.Stream(priority=-1).priority == -1
    assert torch.infini.Stream(priority=-1000).priority == -1  # clamped to the highest
    assert torch.infini.Stream(priority=1000).priority == 0  # clamped to the lowest
    assert torch.infini.Stream(priority=1).priority == 0
    assert torch.infini.default_stream().priority == 0
    # high- and low-priority streams come from different pools
    highs = {torch.infini.Stream(priority=-1) for _ in range(4)}
    lows = {torch.infini.Stream(priority=0) for _ in range(4)}
    assert not highs & lows


def test_generic_stream_with_priority_reports_it():
    s = torch.Stream("infini", priority=-1)
    wrapped = torch.infini.Stream(stream_id=s.stream_id, device_index=s.device_index, device_type=s.device_type)
    assert wrapped.priority == -1


def test_equality_and_hash_like_cuda_streams():
    assert torch.infini.current_stream() == torch.infini.current_stream()
    assert hash(torch.infini.current_stream()) == hash(torch.infini.current_stream())
    assert torch.infini.current_stream() == torch.infini.default_stream()
    a, b = torch.infini.Stream(), torch.infini.Stream()
    assert a != b
    assert hash(a) != hash(b)
    assert a != object()
    same_as_a = torch.infini.Stream(stream_id=a.stream_id, device_index=a.device_index, device_type=a.device_type)
    assert same_as_a == a and hash(same_as_a) == hash(a)
    seen = {a: 1, b: 2}
    assert seen[same_as_a] == 1
    assert len({a, b, same_as_a, torch.infini.default_stream()}) == 3


def test_equality_with_generic_streams_is_consistent_with_hash():
    generic = torch.accelerator.current_stream()
    mine = torch.infini.current_stream()
    assert same_stream(generic, mine)
    # Python's rule: objects that compare equal must hash alike.
    for a, b in ((generic, mine), (mine, generic)):
        if a == b:
            assert hash(a) == hash(b)
            assert {a: "x"}.get(b) == "x"


def test_infini_streams_compare_unequal_to_generic_streams_like_cuda():
    # torch.cuda.Stream.__eq__ is False for anything but a torch.cuda.Stream.
    generic = torch.accelerator.current_stream()
    mine = torch.infini.current_stream()
    assert (mine == generic) is False
    assert (generic == mine) is False


# --- pending work, query and synchronize -------------------------------------------------


def test_query_false_while_work_is_pending_true_after_synchronize():
    s = torch.infini.Stream()
    assert s.query() is True
    hold(s, 250)
    assert s.query() is False
    s.synchronize()
    assert s.query() is True


def test_default_stream_pending_until_device_synchronize():
    default = torch.infini.default_stream()
    hold(default, 250)
    assert default.query() is False
    torch.infini.synchronize()
    assert default.query() is True


def test_stream_synchronize_waits_only_for_that_stream():
    busy, idle = torch.infini.Stream(), torch.infini.Stream()
    hold(busy, 500)
    idle.synchronize()
    assert busy.query() is False
    busy.synchronize()
    assert busy.query() is True


def test_kernels_and_copies_run_on_the_current_stream(device):
    s = torch.infini.Stream()
    x = values().to(device)
    with torch.infini.stream(s):
        hold(s, 250)
        y = x + x
        z = torch.empty_like(y)
        z.copy_(y)  # device-to-device: queued, not synchronous
    assert s.query() is False
    assert torch.infini.default_stream().query() is True  # nothing went to the default stream
    s.synchronize()
    assert torch.equal(z.cpu(), values(2))


def test_wait_stream_orders_a_read_on_another_stream(device):
    a, b = torch.infini.Stream(), torch.infini.Stream()
    x = values().to(device)
    with torch.infini.stream(a):
        hold(a, 250)
        y = x + x  # written on a, behind the delay
        w = torch.empty_like(y)
        w.copy_(y)
    b.wait_stream(a)
    with torch.infini.stream(b):
        out = w + x  # read on b
    assert b.query() is False  # b waits for a's delay
    with torch.infini.stream(b):
        result = out.cpu()  # synchronizes b only
    assert torch.equal(result, values(3))


def test_wait_stream_accepts_a_generic_torch_stream(device):
    a = torch.Stream("infini")
    b = torch.infini.Stream()
    x = values().to(device)
    with torch.infini.stream(a):
        hold(a, 200)
        y = x + x
    b.wait_stream(a)
    with torch.infini.stream(b):
        out = y + x
        assert torch.equal(out.cpu(), values(3))


def test_record_event_and_wait_event(device):
    a, b = torch.infini.Stream(), torch.infini.Stream()
    x = values().to(device)
    with torch.infini.stream(a):
        hold(a, 200)
        y = x + x
    e = a.record_event()
    assert isinstance(e, torch.infini.Event)
    assert e.query() is False
    b.wait_event(e)
    assert b.query() is False
    with torch.infini.stream(b):
        out = y + y
        assert torch.equal(out.cpu(), values(4))
    mine = torch.infini.Event()
    assert a.record_event(mine) is mine


# --- selecting streams ----------------------------------------------------------


def test_stream_context_sets_and_restores():
    default = torch.infini.current_stream()
    s1, s2 = torch.infini.Stream(), torch.infini.Stream()
    with torch.infini.stream(s1):
        assert torch.infini.current_stream() == s1
        with torch.infini.stream(s2):
            assert torch.infini.current_stream() == s2
        assert torch.infini.current_stream() == s1
    assert torch.infini.current_stream() == default


def test_stream_context_restores_on_exception():
    default = torch.infini.current_stream()
    s = torch.infini.Stream()
    with pytest.raises(RuntimeError, match="boom"):
        with torch.infini.stream(s):
            raise RuntimeError("boom")
    assert torch.infini.current_stream() == default


def test_stream_none_is_a_noop():
    s = torch.infini.Stream()
    with torch.infini.stream(s):
        with torch.infini.stream(None):
            assert torch.infini.current_stream() == s
        assert torch.infini.current_stream() == s
    with torch.infini.stream(None):
        assert torch.infini.current_stream() == torch.infini.default_stream()


def test_set_stream_and_none():
    s = torch.infini.Stream()
    try:
        torch.infini.set_stream(s)
        assert torch.infini.current_stream() == s
        torch.infini.set_stream(None)
        assert torch.infini.current_stream() == s
    finally:
        torch.infini.set_stream(torch.infini.default_stream())
    assert torch.infini.current_stream() == torch.infini.default_stream()


def test_set_stream_rejects_a_stream_of_another_device_type():
    with pytest.raises((ValueError, RuntimeError)):
        torch.infini.set_stream(torch.Stream("cpu"))


# --- generic PyTorch paths -------------------------------------------------------


def test_generic_torch_stream_is_asynchronous():
    s = torch.Stream("infini")
    assert s.device_type == torch.infini.default_stream().device_type
    hold(s, 250)
    assert s.query() is False
    torch.accelerator.synchronize()
    assert s.query() is True


def test_torch_accelerator_stream_api():
    assert torch.accelerator.current_accelerator() == torch.device("infini")
    assert same_stream(torch.accelerator.current_stream(), torch.infini.current_stream())
    assert same_stream(torch.accelerator.current_stream(0), torch.infini.current_stream(0))
    s = torch.infini.Stream()
    torch.accelerator.set_stream(s)
    try:
        assert torch.infini.current_stream() == s
        assert same_stream(torch.accelerator.current_stream(), s)
    finally:
        torch.accelerator.set_stream(torch.infini.default_stream())
    assert torch.infini.current_stream() == torch.infini.default_stream()


def test_torch_accelerator_synchronize_waits_for_side_streams():
    s = torch.infini.Stream()
    hold(s, 250)
    assert s.query() is False
    torch.accelerator.synchronize()
    assert s.query() is True


def test_generic_stream_as_context_manager():
    s = torch.Stream("infini")
    with s:
        assert same_stream(torch.infini.current_stream(), s)
    assert torch.infini.current_stream() == torch.infini.default_stream()
