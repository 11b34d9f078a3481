"""Event contracts: record, query, synchronize, wait and elapsed_time, as
torch.cuda.Event defines them. Run on every backend (see conftest.py)."""

from __future__ import annotations

import pytest
import torch

N = 1 << 14


@pytest.mark.covers("Event")
def test_event_is_a_torch_event_and_unrecorded_is_complete(mod):
    e = mod.Event()
    assert isinstance(e, torch.Event)
    assert e.query() is True  # never recorded: nothing to wait for
    e.synchronize()
    e.wait()  # waiting on an unrecorded event is a no-op
    mod.current_stream().synchronize()


@pytest.mark.covers("Event")
def test_event_query_and_synchronize_follow_the_stream(mod, hold):
    s = mod.Stream()
    e = mod.Event()
    hold(s, 200)
    e.record(s)
    assert e.query() is False
    e.synchronize()
    assert e.query() is True
    s.synchronize()
    assert s.query() is True


@pytest.mark.covers("Event", "stream")
def test_event_record_defaults_to_the_current_stream(mod, hold):
    s = mod.Stream()
    e = mod.Event()
    with mod.stream(s):
        hold(s, 200)
        e.record()
    assert e.query() is False
    s.synchronize()
    assert e.query() is True


@pytest.mark.covers("Event")
def test_event_wait_orders_another_stream(mod, dev, hold):
    producer, consumer = mod.Stream(), mod.Stream()
    x = torch.arange(N, dtype=torch.float32).to(dev)
    e = mod.Event()
    with mod.stream(producer):
        hold(producer, 200)
        y = x + x
        e.record()
    e.wait(consumer)
    assert consumer.query() is False
    with mod.stream(consumer):
        out = y + y
    consumer.synchronize()
    assert e.query() is True
    with mod.stream(consumer):
        assert torch.equal(out.cpu(), torch.arange(N, dtype=torch.float32) * 4)


@pytest.mark.covers("Event")
def test_elapsed_time_is_positive_and_grows_with_the_work(mod, hold):
    s = mod.Stream()
    marks = [mod.Event(enable_timing=True) for _ in range(3)]
    marks[0].record(s)
    hold(s, 30)
    marks[1].record(s)
    hold(s, 90)
    marks[2].record(s)
    marks[2].synchronize()
    short = marks[0].elapsed_time(marks[1])
    long = marks[1].elapsed_time(marks[2])
    assert isinstance(short, float)
    assert short > 0
    assert long > short


@pytest.mark.covers("Event")
def test_elapsed_time_errors(mod):
    timed = [mod.Event(enable_timing=True) for _ in range(2)]
    with pytest.raises(RuntimeError):
        timed[0].elapsed_time(timed[1])  # neither recorded
    plain = [mod.Event() for _ in range(2)]
    for e in plain:
        e.record()
    plain[1].synchronize()
    with pytest.raises(RuntimeError):
        plain[0].elapsed_time(plain[1])  # timing not enabled
