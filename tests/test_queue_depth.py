"""Backpressure: a stream's queue holds at most 1024 pending operations (as a
CUDA stream's launch queue does); past that the submitting thread waits for
the worker to drain it, so a producer faster than the device cannot grow host
memory without bound. Results stay exact."""

from __future__ import annotations

import threading
import time

import pytest
import torch

import torch_infini  # noqa: F401
from infini_testing import hold, on_host
from hang_guard import HANG_GUARD_S

DEV = torch.device("infini:0")
DEPTH = 1024

pytestmark = pytest.mark.skipif(not on_host(), reason="the queue depth is the host runtime's")


def submit_in_thread(stream: torch.Stream, x: torch.Tensor, n: int) -> tuple[threading.Thread, dict]:
    """Queue ``n`` in-place adds on ``stream`` from a new thread; returns the
    thread and a dict that receives the moment it finished submitting."""
    done: dict = {}

    def produce():
        with torch.infini.stream(stream):
            for _ in range(n):
                x.add_(1)
        done["at"] = time.monotonic()

    thread = threading.Thread(target=produce, daemon=True)
    return thread, done


def run_held(n: int, hold_ms: float) -> tuple[float, float, torch.Tensor]:
    s = torch.infini.Stream()
    x = torch.zeros(4, device=DEV)
    x.add_(1).sub_(1)  # the operator's first call (its metadata) is not timed
    s.wait_stream(torch.infini.current_stream())
    start = time.monotonic()  # before the hold: a busy machine only lengthens what is measured
    hold(s, hold_ms)
    thread, done = submit_in_thread(s, x, n)
    thread.start()
    thread.join(timeout=HANG_GUARD_S)
    assert not thread.is_alive()
    s.synchronize()
    end = time.monotonic()
    return done["at"] - start, end - start, x


def test_submitting_past_the_depth_waits_for_the_worker():
    submitted_after, _, x = run_held(DEPTH + 200, hold_ms=1500)
    # The worker is held for 1.5 s: a producer of more than DEPTH operations
    # cannot have finished submitting before that.
    assert submitted_after > 1.2, submitted_after
    assert torch.equal(x.cpu(), torch.full((4,), float(DEPTH + 200)))


def test_submitting_within_the_depth_does_not_wait():
    submitted_after, total, x = run_held(DEPTH - 100, hold_ms=1500)
    assert submitted_after < 1.0, submitted_after
    assert total > 1.2
    assert torch.equal(x.cpu(), torch.full((4,), float(DEPTH - 100)))


def test_a_full_queue_with_a_cross_stream_wait_does_not_deadlock():
    """Both streams full, one waiting on the other's event: both drain."""
    a, b = torch.infini.Stream(), torch.infini.Stream()
    x = torch.zeros(4, device=DEV)
    y = torch.zeros(4, device=DEV)
    y.add_(x)
    a.wait_stream(torch.infini.current_stream())
    b.wait_stream(torch.infini.current_stream())
    hold(a, 300)
    with torch.infini.stream(a):
        for _ in range(DEPTH + 50):
            x.add_(1)
        event = torch.infini.Event()
        event.record()
    with torch.infini.stream(b):
        b.wait_event(event)
        for _ in range(DEPTH + 50):
            y.add_(x)  # reads x after all of a's adds
    b.synchronize()
    assert torch.equal(y.cpu(), torch.full((4,), float((DEPTH + 50) ** 2)))


def test_pending_operations_never_exceed_the_depth():
    """While the worker is held, a producer of 3000 operations gets no further
    than the depth (plus the one it is waiting to queue)."""
    s = torch.infini.Stream()
    x = torch.zeros(4, device=DEV)
    x.add_(1).sub_(1)
    s.wait_stream(torch.infini.current_stream())
    progress = [0]

    def produce():
        with torch.infini.stream(s):
            for _ in range(3000):
                x.add_(1)
                progress[0] += 1

    hold(s, 3000)
    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    # No fixed sleep: wait (however long the machine takes) until the
    # producer is at the depth, then read its progress while the worker is
    # still held, which the stream's state shows.
    deadline = time.monotonic() + HANG_GUARD_S
    while progress[0] < DEPTH - 10 and thread.is_alive():
        assert time.monotonic() < deadline, "hung: the producer stopped before the depth"
        time.sleep(0.001)
    queued_while_held = progress[0]
    held = not s.query()
    thread.join(timeout=HANG_GUARD_S)
    assert not thread.is_alive()
    s.synchronize()
    assert held, "the worker's hold ended before the producer reached the depth"
    assert DEPTH - 10 <= queued_while_held <= DEPTH, queued_while_held
    assert torch.equal(x.cpu(), torch.full((4,), 3000.0))


def test_a_wait_on_an_event_does_not_wait_for_space():
    """PyTorch queues a stream's wait on an event (torch.Event.wait,
    torch.Stream.wait_event) holding the GIL, and a thread running the
    stream's tasks may need the GIL to finish one (releasing a tensor that has
    a Python object): a wait that waited for space in a full queue could
    deadlock with it. So the wait is queued at once, as cudaStreamWaitEvent
    is, while the worker is still held."""
    s, other = torch.infini.Stream(), torch.infini.Stream()
    x = torch.zeros(4, device=DEV)
    x.add_(1).sub_(1)
    s.wait_stream(torch.infini.current_stream())
    # The queue starts empty: a stream wait still pending (a descheduled
    # worker on a loaded machine) would make the queue below one task over
    # full, and the producer would then run the held task itself.
    s.synchronize()
    hold(s, 3000)
    after_hold = torch.infini.Event()
    after_hold.record(s)
    with torch.infini.stream(s):
        for _ in range(DEPTH - 2):  # with the hold and the record: a full queue
            x.add_(1)
    event = torch.infini.Event()
    event.record(other)
    s.wait_event(event)
    returned_while_held = not after_hold.query()
    s.synchronize()
    assert returned_while_held, "the wait on the event waited for the held worker"
    assert torch.equal(x.cpu(), torch.full((4,), float(DEPTH - 2)))


def test_tasks_run_in_submission_order_as_the_queue_grows_and_wraps():
    """The queue is a ring that grows to the depth a stream reaches and
    reuses its slots (runtime/host/host_task.h): rounds of order-sensitive
    ops behind a hold, each starting where the last left the ring, below,
    across and far past its first size, run as CPU runs them in order."""
    s = torch.infini.Stream()
    x = torch.zeros(1, dtype=torch.int64, device=DEV)
    expected = torch.zeros(1, dtype=torch.int64)
    s.wait_stream(torch.infini.current_stream())
    s.synchronize()

    def step(t: torch.Tensor, i: int) -> None:
        t.mul_(3).add_(i).remainder_(1000003)  # each order gives another value

    with torch.infini.stream(s):
        for round_, n in enumerate((3, 7, 40, 70, 300)):
            hold(s, 20)
            for i in range(n):
                step(x, i + round_)
                step(expected, i + round_)
            if round_ % 2:
                s.synchronize()  # the next round starts in a drained ring
    s.synchronize()
    assert torch.equal(x.cpu(), expected)
