"""Stream contracts: the torch.cuda stream API, its state transitions and the
ordering it promises. Run on every backend (see conftest.py)."""

from __future__ import annotations

import threading

import pytest
import torch

N = 1 << 14


def _values(scale: float = 1.0) -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32) * scale


@pytest.mark.covers("Stream")
def test_stream_is_a_torch_stream_on_the_device(mod, dev, backend):
    s = mod.Stream()
    assert isinstance(s, torch.Stream)
    assert s.device == torch.device(backend, mod.current_device())
    assert mod.Stream(device=dev).device == dev
    assert mod.Stream(device=0).device == dev
    assert s.query() is True  # nothing queued yet
    s.synchronize()


@pytest.mark.covers("Stream")
def test_stream_query_reflects_pending_work(mod, hold):
    s = mod.Stream()
    hold(s, 200)
    assert s.query() is False
    s.synchronize()
    assert s.query() is True


@pytest.mark.covers("Stream")
def test_stream_synchronize_waits_only_for_its_own_work(mod, hold):
    busy, idle = mod.Stream(), mod.Stream()
    hold(busy, 400)
    idle.synchronize()
    assert idle.query() is True
    assert busy.query() is False
    busy.synchronize()
    assert busy.query() is True


@pytest.mark.covers("Stream")
def test_stream_priority_and_clamping(mod):
    assert mod.Stream().priority == 0
    assert mod.Stream(priority=0).priority == 0
    high = mod.Stream(priority=-1)
    assert high.priority == -1
    assert mod.Stream(priority=100).priority == 0  # clamped to the lowest
    clamped = mod.Stream(priority=-100).priority  # clamped to the highest
    assert -100 < clamped <= -1
    assert mod.default_stream().priority == 0


@pytest.mark.covers("Stream", "current_stream", "default_stream")
def test_stream_equality_and_hash(mod, dev, backend):
    assert mod.current_stream() == mod.current_stream()
    assert hash(mod.current_stream()) == hash(mod.current_stream())
    assert mod.default_stream(0) == mod.default_stream(dev) == mod.default_stream(f"{backend}:0")
    a, b = mod.Stream(), mod.Stream()
    assert a != b
    assert a == a
    assert a != "not a stream"
    table = {a: "a", b: "b", mod.default_stream(): "default"}
    assert table[a] == "a" and table[b] == "b"
    assert table[mod.current_stream()] == "default"


@pytest.mark.covers("current_stream", "default_stream")
def test_current_stream_starts_as_default_stream(mod, dev):
    assert mod.current_stream() == mod.default_stream()
    assert mod.current_stream(dev) == mod.default_stream(dev)
    assert isinstance(mod.current_stream(), torch.Stream)
    assert mod.default_stream().device == dev


@pytest.mark.covers("set_stream", "current_stream")
def test_set_stream_selects_and_none_is_noop(mod):
    s = mod.Stream()
    default = mod.default_stream()
    mod.set_stream(s)
    try:
        assert mod.current_stream() == s
        mod.set_stream(None)
        assert mod.current_stream() == s
    finally:
        mod.set_stream(default)
    assert mod.current_stream() == default


@pytest.mark.covers("stream", "StreamContext")
def test_stream_context_sets_and_restores(mod):
    outer, inner = mod.Stream(), mod.Stream()
    default = mod.current_stream()
    ctx = mod.stream(outer)
    assert isinstance(ctx, mod.StreamContext)
    with ctx:
        assert mod.current_stream() == outer
        with mod.stream(inner):
            assert mod.current_stream() == inner
        assert mod.current_stream() == outer
        with mod.stream(None):  # a no-op
            assert mod.current_stream() == outer
    assert mod.current_stream() == default
    with mod.StreamContext(inner):
        assert mod.current_stream() == inner
    assert mod.current_stream() == default


@pytest.mark.covers("stream", "StreamContext")
def test_stream_context_restores_on_exception(mod):
    default = mod.current_stream()
    s = mod.Stream()
    with pytest.raises(ZeroDivisionError):
        with mod.stream(s):
            assert mod.current_stream() == s
            1 / 0
    assert mod.current_stream() == default


@pytest.mark.covers("stream", "Stream")
def test_work_is_queued_on_the_current_stream(mod, dev, hold):
    s = mod.Stream()
    x = _values().to(dev)
    with mod.stream(s):
        hold(s, 200)
        y = x + x
    assert s.query() is False  # the add went to s, behind the wait
    s.synchronize()
    with mod.stream(s):
        assert torch.equal(y.cpu(), _values(2))


@pytest.mark.covers("Stream")
def test_wait_stream_orders_a_read_after_the_write(mod, dev, hold):
    producer, consumer = mod.Stream(), mod.Stream()
    x = _values().to(dev)
    with mod.stream(producer):
        hold(producer, 200)
        y = x + x
        z = torch.empty_like(y)
        z.copy_(y)  # device-to-device copy, also queued behind the wait
    consumer.wait_stream(producer)
    with mod.stream(consumer):
        out = z + x
    assert consumer.query() is False  # waits for the producer
    consumer.synchronize()
    with mod.stream(consumer):
        assert torch.equal(out.cpu(), _values(3))


@pytest.mark.covers("Stream", "Event")
def test_record_event_and_wait_event(mod, dev, hold):
    producer, consumer = mod.Stream(), mod.Stream()
    x = _values().to(dev)
    with mod.stream(producer):
        hold(producer, 200)
        y = x + x
    event = producer.record_event()
    assert isinstance(event, mod.Event)
    assert event.query() is False
    consumer.wait_event(event)
    with mod.stream(consumer):
        out = y + x
    consumer.synchronize()
    assert event.query() is True
    with mod.stream(consumer):
        assert torch.equal(out.cpu(), _values(3))
    mine = mod.Event()
    assert producer.record_event(mine) is mine


@pytest.mark.covers("current_stream", "set_stream")
def test_current_stream_is_per_thread(mod):
    mine = mod.Stream()
    seen = {}

    def other_thread():
        seen["initial"] = mod.current_stream()
        theirs = mod.Stream()
        mod.set_stream(theirs)
        seen["set"] = mod.current_stream() == theirs

    mod.set_stream(mine)
    try:
        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert mod.current_stream() == mine  # untouched by the other thread
    finally:
        mod.set_stream(mod.default_stream())
    assert seen["initial"] == mod.default_stream()
    assert seen["set"] is True




@pytest.mark.covers("current_stream", "default_stream")
def test_negative_device_index_means_the_current_device(mod, backend, request):
    assert mod.current_stream(-1) == mod.current_stream()
    assert mod.default_stream(-1) == mod.default_stream()
