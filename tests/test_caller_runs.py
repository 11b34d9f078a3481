"""A synchronizing caller runs the pending tasks itself (host runtime).

When a thread waits for work that no one has started (the worker sleeps, or
has not reached it), it runs those tasks itself, in order, instead of waking
the worker and sleeping. These tests prove that this path keeps the stream
semantics CPU eager and CUDA give: stream order (results equal to the CPU,
bit for bit), order across streams and threads through events, sticky
asynchronous errors reported once by the right synchronizing call, events'
timestamps, and the task's thread-local state (the caller's no_grad,
inference mode, autocast or dispatch mode must not reach the CPU kernel)."""

from __future__ import annotations

import threading

import pytest
import torch

import torch_infini  # noqa: F401
from infini_testing import RecordingMode, calls_run_at_once, drain_async_errors, hold, on_host
from hang_guard import HANG_GUARD_S

DEV = torch.device("infini:0")

pytestmark = pytest.mark.skipif(not on_host(), reason="caller-run tasks are the host runtime's")


def chain(x: torch.Tensor, steps: int, sync_every: int) -> torch.Tensor:
    """Arithmetic whose result depends on the order of every step; on infini
    it synchronizes every ``sync_every`` steps (so the caller runs what is
    pending) and reads values back in between."""
    for i in range(steps):
        y = x * 3 - i
        x = (y + x) / 2
        x.add_(y, alpha=0.25)
        if x.device.type == "infini" and i % sync_every == 0:
            if i % (2 * sync_every) == 0:
                torch.infini.synchronize()
            else:
                torch.infini.current_stream().synchronize()
    return x


@pytest.fixture(autouse=True)
def _no_error_left_behind():
    drain_async_errors()
    yield
    drain_async_errors()


@pytest.mark.parametrize("sync_every", [1, 3, 17])
def test_synchronizing_often_keeps_stream_order(sync_every):
    start = torch.linspace(-2, 2, 257)
    want = chain(start.clone(), 120, sync_every)
    got = chain(start.to(DEV), 120, sync_every)
    assert torch.equal(got.cpu(), want)


def test_reads_between_small_ops_match_cpu():
    # .cpu() and .item() wait for the pending ops (run by this thread).
    x, xc = torch.arange(16.0, device=DEV), torch.arange(16.0)
    seen, want = [], []
    for i in range(60):
        x = x * 1.5 - i
        xc = xc * 1.5 - i
        seen.append(x.sum().item())
        want.append(xc.sum().item())
        if i % 7 == 0:
            assert torch.equal(x.cpu(), xc)
    assert seen == want


def test_waiting_behind_a_busy_worker_keeps_order():
    # The worker is on a long task when the caller synchronizes: the caller
    # must not run later tasks beside it.
    s = torch.infini.current_stream()
    x = torch.ones(64, device=DEV)
    (x * 2).cpu()  # the operators' first calls (run directly) are done
    (x + x).cpu()
    for _ in range(5):
        hold(s, 20)
        x = x * 2
        x = x + 1
        torch.infini.synchronize()
    want = torch.ones(64)
    for _ in range(5):
        want = want * 2 + 1
    assert torch.equal(x.cpu(), want)


def test_cross_stream_events_with_caller_runs():
    a, b = torch.infini.Stream(), torch.infini.Stream()
    x = torch.arange(32.0, device=DEV)
    xc = torch.arange(32.0)
    torch.infini.synchronize()
    for i in range(40):
        with torch.infini.stream(a):
            x.mul_(1.25).sub_(i)
            done_a = torch.infini.Event()
            done_a.record()
        with torch.infini.stream(b):
            b.wait_event(done_a)
            x.add_(0.5)
            done_b = torch.infini.Event()
            done_b.record()
        a.wait_event(done_b)
        xc.mul_(1.25).sub_(i).add_(0.5)
        if i % 5 == 0:
            done_b.synchronize()  # the caller may run b's (and a's) tasks
        if i % 7 == 0:
            a.synchronize()
    torch.infini.synchronize()
    assert torch.equal(x.cpu(), xc)


def test_threads_synchronizing_one_stream_while_another_submits():
    s = torch.infini.Stream()
    x = torch.arange(8, dtype=torch.float64, device=DEV)
    xc = torch.arange(8, dtype=torch.float64)
    with torch.infini.stream(s):
        x.add_(1).mul_(3).remainder_(1000003)  # the kinds' direct first calls
    xc.add_(1).mul_(3).remainder_(1000003)
    s.synchronize()
    stop = threading.Event()
    errors: list = []

    def syncer():
        try:
            while not stop.is_set():
                s.synchronize()
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    syncers = [threading.Thread(target=syncer, daemon=True) for _ in range(2)]
    for t in syncers:
        t.start()
    with torch.infini.stream(s):
        for _ in range(400):
            x.add_(1).mul_(3).remainder_(1000003)  # exact, and order-dependent
    for _ in range(400):
        xc.add_(1).mul_(3).remainder_(1000003)
    stop.set()
    for t in syncers:
        t.join(timeout=HANG_GUARD_S)
        assert not t.is_alive()
    s.synchronize()
    assert not errors, errors
    assert torch.equal(x.cpu(), xc)


def fail_queued(busy: bool = False) -> None:
    """Queue a kernel that fails where it runs (an index out of range); with
    ``busy``, behind a 20 ms hold of the worker (so the caller waits for the
    worker, which then leaves it the failing task)."""
    x = torch.zeros(4, device=DEV)
    bad = torch.tensor([0, 99], device=DEV)
    x.index_select(0, torch.tensor([0, 1], device=DEV))  # the kind's direct first call
    if busy:
        hold(torch.infini.current_stream(), 20)
    x.index_select(0, bad)


@pytest.mark.parametrize("busy", [False, True], ids=["idle_worker", "busy_worker"])
def test_an_error_in_a_caller_run_task_is_sticky_and_reported_once(busy):
    (torch.ones(4, device=DEV) * 5).cpu()  # the kinds' direct first calls
    fail_queued(busy)
    after = torch.ones(4, device=DEV) * 5  # queued after the failing task
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        torch.infini.current_stream().synchronize()
    torch.infini.current_stream().synchronize()  # reported once
    assert torch.equal(after.cpu(), torch.full((4,), 5.0))  # later work ran


@pytest.mark.parametrize("busy", [False, True], ids=["idle_worker", "busy_worker"])
def test_an_event_reports_only_errors_before_its_record(busy):
    before = torch.infini.Event()
    before.record()
    fail_queued(busy)
    after = torch.infini.Event()
    after.record()
    before.synchronize()  # the failure came after this record
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        after.synchronize()


def test_event_timestamps_of_caller_run_tasks():
    s = torch.infini.current_stream()
    start, end = torch.infini.Event(enable_timing=True), torch.infini.Event(enable_timing=True)
    torch.infini.synchronize()
    start.record()
    hold(s, 30)
    end.record()
    end.synchronize()
    # A lower bound only: the 30 ms sleep ran between the two records.
    assert start.elapsed_time(end) >= 29.0


OPS = {
    "mm": lambda t: t @ t,
    "tanh": torch.tanh,
    "softmax": lambda t: t.softmax(-1),
}


def queue_one(op: str):
    """Queue one ``op`` left pending for this thread's next wait (a lone task
    right after a wait for a lone task is not handed to the worker), with its
    CPU result."""
    a = torch.randn(16, 16)
    da = a.to(DEV)
    OPS[op](da).cpu()  # the kind's first call, run directly
    OPS[op](da).cpu()  # a lone task waited for: the next one is left pending
    # Something queued in between, so that the op is queued, not run at once
    # (test_calls_run_at_once.py has the calls run at once).
    torch.infini.current_stream().record_event()
    ran_at_once = calls_run_at_once()
    got = OPS[op](da)
    assert calls_run_at_once() == ran_at_once
    return got, OPS[op](a)


@pytest.mark.parametrize("op", sorted(OPS))
def test_a_dispatch_mode_of_the_caller_does_not_reach_the_tasks(op):
    got, want = queue_one(op)
    with RecordingMode() as mode:
        torch.infini.synchronize()  # runs the pending CPU kernel here
    assert mode.ops == [], mode.ops
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("op", sorted(OPS))
@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "autocast", "enable_grad"])
def test_the_callers_autograd_and_autocast_state_does_not_reach_the_tasks(context, op):
    got, want = queue_one(op)
    manager = {
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
        "autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
        "enable_grad": torch.enable_grad,
    }[context]
    with manager():
        torch.infini.synchronize()
    assert got.dtype == torch.float32
    assert torch.equal(got.cpu(), want)


def test_autograd_through_caller_run_tasks_matches_cpu():
    torch.manual_seed(0)
    w = torch.randn(8, 8, requires_grad=True)
    x = torch.randn(4, 8)
    wd = w.detach().to(DEV).requires_grad_()
    xd = x.to(DEV)
    for _ in range(3):
        loss = torch.tanh(x @ w).pow(2).sum()
        loss.backward()
        lossd = torch.tanh(xd @ wd).pow(2).sum()
        lossd.backward()
        assert lossd.item() == loss.item()
    assert torch.equal(wd.grad.cpu(), w.grad)
