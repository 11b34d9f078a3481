"""Asynchronous errors, as on CUDA: an error raised by a kernel on a stream's
worker is sticky until a synchronizing call reports it; the synchronizing
calls (device, stream, event) report it after the work they wait for is done;
and calls that do not synchronize for the user (allocation, empty_cache) are
not broken by it."""

from __future__ import annotations

import time

import pytest
import torch

import torch_infini  # noqa: F401
from infini_testing import drain_async_errors, hold, on_host
from hang_guard import HANG_GUARD_S

DEV = torch.device("infini:0")

pytestmark = pytest.mark.skipif(not on_host(), reason="asynchronous kernel errors are made on the host runtime's workers")


def fail_async() -> None:
    """Queue, on the current stream, a kernel that fails on the worker: an
    index out of range is only seen by the kernel (data-dependent)."""
    x = torch.zeros(4, device=DEV)
    # The first call of a kind runs directly (CPU's errors at the call): a
    # valid one of the same kind makes the next one queued.
    x.index_select(0, torch.tensor([0, 1], device=DEV))
    bad = torch.tensor([0, 99], device=DEV)
    x.index_select(0, bad)


@pytest.fixture(autouse=True)
def _no_error_left_behind():
    drain_async_errors()
    yield
    drain_async_errors()


def test_the_failing_kernel_fails_asynchronously():
    fail_async()  # returns: the error belongs to a later synchronizing call
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        torch.infini.synchronize()
    torch.infini.synchronize()  # reported once


def test_an_error_of_work_already_finished_is_reported_by_synchronize():
    # Nothing is pending when synchronize is called (its path that does not
    # wait, nor release the GIL): the finished work's error is still its.
    side = torch.infini.Stream()
    with torch.infini.stream(side):
        fail_async()
    done = torch.infini.Event()
    done.record(side)
    deadline = time.monotonic() + 60
    while not done.query():  # an event's query reports no error
        assert time.monotonic() < deadline, "the failing work never finished"
        time.sleep(0.001)
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        torch.infini.synchronize()
    torch.infini.synchronize()  # reported once
    side.synchronize()


def test_synchronize_waits_for_every_stream_before_reporting():
    failing = torch.infini.Stream()
    busy = torch.infini.Stream()
    (torch.ones(8, device=DEV) * 3).cpu()  # warm the operators' metadata caches
    with torch.infini.stream(failing):
        fail_async()
    start = time.monotonic()  # before the hold: a busy machine only lengthens what is measured
    hold(busy, 400)
    with torch.infini.stream(busy):
        marker = torch.ones(8, device=DEV) * 3
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        torch.infini.synchronize()
    assert busy.query(), "synchronize raised before the busy stream had finished"
    assert time.monotonic() - start > 0.3
    assert torch.equal(marker.cpu(), torch.full((8,), 3.0))


def test_synchronize_reports_the_errors_of_every_stream_at_once():
    streams = [torch.infini.Stream() for _ in range(3)]
    for s in streams:
        with torch.infini.stream(s):
            fail_async()
    with pytest.raises(RuntimeError, match="3 streams of device 0 failed") as raised:
        torch.infini.synchronize()
    assert str(raised.value).count("asynchronous error") == 3
    torch.infini.synchronize()  # nothing left: one call reported them all
    for s in streams:
        s.synchronize()


def test_event_synchronize_reports_the_failure_before_its_record():
    s = torch.infini.Stream()
    with torch.infini.stream(s):
        fail_async()
        event = torch.infini.Event()
        event.record()
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        event.synchronize()
    s.synchronize()  # reported by the event: not again by the stream


def test_event_synchronize_leaves_a_later_failure_to_the_stream():
    s = torch.infini.Stream()
    with torch.infini.stream(s):
        event = torch.infini.Event()
        event.record()
        fail_async()
    event.synchronize()  # the failure is after the record
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        s.synchronize()


def test_generic_event_synchronize_reports_too():
    s = torch.infini.Stream()
    with torch.infini.stream(s):
        fail_async()
        event = torch.Event("infini")
        event.record()
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        event.synchronize()


def test_allocation_that_fits_after_freeing_the_cache_ignores_a_pending_error():
    total = torch.infini.mem_get_info()[1]
    torch.infini.empty_cache()
    try:
        torch.infini.set_per_process_memory_fraction(64 / (total / 2**20))  # 64 MiB
        cached = torch.empty(40 * 2**20, dtype=torch.uint8, device=DEV)
        del cached  # 40 MiB stays reserved in the cache
        fail_async()
        # Fits only once the cache is returned: the retry must not report the
        # pending error (it belongs to the next synchronize).
        other = torch.empty(50 * 2**20, dtype=torch.uint8, device=DEV)
        assert other.numel() == 50 * 2**20
        del other
    finally:
        torch.infini.set_per_process_memory_fraction(1.0)
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        torch.infini.synchronize()


def test_empty_cache_frees_despite_a_pending_error():
    torch.infini.empty_cache()
    x = torch.empty(8 * 2**20, dtype=torch.uint8, device=DEV)
    del x
    cached = torch.infini.memory_reserved()
    fail_async()
    torch.infini.empty_cache()
    # Other tests' live tensors (and cached device scalars) may keep small
    # segments: the freed 8 MiB must be gone.
    assert torch.infini.memory_reserved() <= cached - 8 * 2**20
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        torch.infini.synchronize()


def test_huge_request_raises_out_of_memory_despite_a_pending_error():
    fail_async()
    with pytest.raises(torch.OutOfMemoryError, match="infini out of memory"):
        torch.empty(2**40, dtype=torch.uint8, device=DEV)
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        torch.infini.synchronize()


def test_a_completed_failing_task_always_reports_its_error():
    """A caller that sees the failing task completed sees its error: polled
    without a pause, query() once returned True (completed, no error) in a
    third of the tries, because the worker published the completion before
    the error."""
    missed = 0
    for _ in range(200):
        s = torch.infini.Stream()
        with torch.infini.stream(s):
            fail_async()
        try:
            while not s.query():
                pass
            missed += 1
        except RuntimeError as e:
            assert "out of range" in str(e) or "out of bounds" in str(e), e
        drain_async_errors()
    assert missed == 0, f"{missed} of 200 completed failing tasks reported no error"


def test_stream_query_reports_once_then_is_clean():
    s = torch.infini.Stream()
    with torch.infini.stream(s):
        fail_async()
    deadline = time.monotonic() + HANG_GUARD_S
    with pytest.raises(RuntimeError, match="out of range|out of bounds"):
        while not s.query():
            assert time.monotonic() < deadline, "hung: the stream never finished"
            time.sleep(0.001)
    assert s.query()
