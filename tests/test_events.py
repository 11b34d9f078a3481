"""torch.infini.Event on the asynchronous host runtime, with torch.cuda's
semantics: record, query, synchronize, wait and elapsed_time over real work.

Pending states come from the private hook ``_test_enqueue_delay``; these tests
fail on a runtime that executes work synchronously.
"""

from __future__ import annotations

import time

import pytest
import torch

import torch_infini
from infini_testing import hold

N = 1 << 15




def values(scale: float = 1.0) -> torch.Tensor:
    return torch.arange(N, dtype=torch.float32) * scale


def test_event_subclasses_torch_event():
    e = torch.infini.Event()
    assert isinstance(e, torch.Event)
    assert e.device.type == "infini"


def test_unrecorded_event_is_complete_and_harmless():
    e = torch.infini.Event(enable_timing=True)
    assert e.query() is True
    e.synchronize()  # nothing to wait for
    s = torch.infini.Stream()
    e.wait(s)  # waiting on an unrecorded event is a no-op
    assert s.query() is True


def test_record_query_synchronize():
    s = torch.infini.Stream()
    e = torch.infini.Event()
    hold(s, 250)
    e.record(s)
    assert e.query() is False
    e.synchronize()
    assert e.query() is True


def test_record_defaults_to_current_stream():
    s = torch.infini.Stream()
    e = torch.infini.Event()
    with torch.infini.stream(s):
        hold(s, 250)
        e.record()
    assert e.query() is False
    s.synchronize()
    assert e.query() is True


def test_event_marks_a_queue_position_not_later_work():
    s = torch.infini.Stream()
    early, late = torch.infini.Event(), torch.infini.Event()
    early.record(s)
    hold(s, 300)
    late.record(s)
    early.synchronize()  # must not wait for the delay queued after it
    assert early.query() is True
    assert late.query() is False
    late.synchronize()
    assert late.query() is True


def test_blocking_event_synchronizes():
    s = torch.infini.Stream()
    e = torch.infini.Event(blocking=True)
    hold(s, 100)
    e.record(s)
    e.synchronize()
    assert e.query() is True


def test_wait_orders_work_on_another_stream(device):
    producer, consumer = torch.infini.Stream(), torch.infini.Stream()
    x = values().to(device)
    e = torch.infini.Event()
    with torch.infini.stream(producer):
        hold(producer, 250)
        y = x + x
        e.record()
    e.wait(consumer)
    assert consumer.query() is False  # blocked behind the producer's delay
    with torch.infini.stream(consumer):
        out = y + x
        result = out.cpu()
    assert torch.equal(result, values(3))


def test_wait_defaults_to_current_stream(device):
    producer, consumer = torch.infini.Stream(), torch.infini.Stream()
    x = values().to(device)
    e = torch.infini.Event()
    with torch.infini.stream(producer):
        hold(producer, 200)
        y = x + x
        e.record()
    with torch.infini.stream(consumer):
        e.wait()
        assert consumer.query() is False
        out = y + y
        assert torch.equal(out.cpu(), values(4))


def test_wait_keeps_the_record_it_captured_after_a_rerecord(device):
    busy, waiter, idle = torch.infini.Stream(), torch.infini.Stream(), torch.infini.Stream()
    x = values().to(device)
    doubled = values(2).to(device)
    y = torch.full((N,), -1.0).to(device)  # a sentinel, overwritten on `busy`
    e = torch.infini.Event()
    with torch.infini.stream(busy):
        hold(busy, 400)
        y.copy_(doubled)
        e.record()
    waiter.wait_event(e)  # captures the record on `busy`
    e.record(idle)  # a newer record elsewhere, completes at once
    idle.synchronize()
    with torch.infini.stream(waiter):
        out = y + x  # must read y after the copy on `busy`
        result = out.cpu()
    assert torch.equal(result, values(3))


def test_elapsed_time_is_positive_and_grows_with_the_work():
    # 30 ms and 60 ms of queued work between timed events; ordering and a
    # generous lower bound only (a loaded machine may oversleep).
    for attempt in range(3):
        s = torch.infini.Stream()
        start, mid, end = (torch.infini.Event(enable_timing=True) for _ in range(3))
        start.record(s)
        hold(s, 30)
        mid.record(s)
        hold(s, 60)
        end.record(s)
        end.synchronize()
        short = start.elapsed_time(mid)
        long = mid.elapsed_time(end)
        total = start.elapsed_time(end)
        assert isinstance(short, float)
        assert short >= 0.5 * 30
        assert long >= 0.5 * 60
        assert total == pytest.approx(short + long, rel=1e-3, abs=0.05)
        if long > short:
            break
    else:
        pytest.fail(f"elapsed time did not grow with the work: {short:.2f} ms then {long:.2f} ms")


def test_elapsed_time_measures_device_work_not_host_time():
    s = torch.infini.Stream()
    start, end = torch.infini.Event(enable_timing=True), torch.infini.Event(enable_timing=True)
    start.record(s)
    end.record(s)
    time.sleep(0.1)  # host time between the records' completion and the query
    end.synchronize()
    assert 0 <= start.elapsed_time(end) < 50


def test_elapsed_time_needs_timing_enabled():
    s = torch.infini.Stream()
    for first, second in ((False, False), (True, False), (False, True)):
        a = torch.infini.Event(enable_timing=first)
        b = torch.infini.Event(enable_timing=second)
        a.record(s)
        b.record(s)
        b.synchronize()
        with pytest.raises(RuntimeError):
            a.elapsed_time(b)


def test_elapsed_time_before_recording_raises():
    a, b = torch.infini.Event(enable_timing=True), torch.infini.Event(enable_timing=True)
    with pytest.raises(RuntimeError):
        a.elapsed_time(b)
    a.record()
    with pytest.raises(RuntimeError):
        a.elapsed_time(b)  # b never recorded
    with pytest.raises(RuntimeError):
        b.elapsed_time(a)


def test_elapsed_time_before_completion_raises():
    s = torch.infini.Stream()
    a, b = torch.infini.Event(enable_timing=True), torch.infini.Event(enable_timing=True)
    a.record(s)
    hold(s, 250)
    b.record(s)
    with pytest.raises(RuntimeError):
        a.elapsed_time(b)
    b.synchronize()
    assert a.elapsed_time(b) > 0


def test_interprocess_events_are_not_implemented():
    with pytest.raises(NotImplementedError):
        torch.infini.Event(interprocess=True)
    e = torch.infini.Event()
    with pytest.raises(NotImplementedError):
        e.ipc_handle()
    with pytest.raises(NotImplementedError):
        torch.infini.Event.from_ipc_handle(0, b"")


def test_generic_torch_event_paths():
    s = torch.Stream("infini")
    start = torch.Event("infini", enable_timing=True)
    end = torch.Event("infini", enable_timing=True)
    assert start.query() is True
    start.record(s)
    hold(s, 30)
    end.record(s)
    assert end.query() is False
    end.synchronize()
    assert end.query() is True
    assert start.elapsed_time(end) >= 0.5 * 30
    other = torch.infini.Stream()
    end.wait(other)
    other.synchronize()


def test_stream_is_idle_once_its_last_event_completed():
    # A race (the event completing before its stream counts the record as
    # done) showed within ~1,000 tries; this makes 5,000, however long they take.
    s = torch.infini.Stream()
    for tries in range(1, 5_001):
        e = torch.infini.Event()
        e.record(s)
        e.synchronize()
        assert s.query() is True, f"stream still pending after its last event completed (try {tries})"


def test_destroying_events_with_pending_work_is_safe(device):
    producer, consumer = torch.infini.Stream(), torch.infini.Stream()
    x = values().to(device)
    with torch.infini.stream(producer):
        hold(producer, 200)
        y = x + x
    e = torch.infini.Event(enable_timing=True)
    e.record(producer)
    consumer.wait_event(e)
    del e  # the queued record and wait keep what they need
    with torch.infini.stream(consumer):
        out = y + x
        assert torch.equal(out.cpu(), values(3))
    for _ in range(200):  # many short-lived events
        torch.infini.Event().record(producer)
    producer.synchronize()


def test_event_accepts_cuda_event_arguments():
    e = torch.infini.Event(enable_timing=True, blocking=False, interprocess=False, external=False)
    e.record()
    e.synchronize()
    assert e.query() is True
