"""A call made right after its caller waited for the stream runs at once
(host runtime).

A caller that waits for each call as soon as it is queued (a loop of small
synchronous ops, of ``.item()`` calls) would run that call itself at the wait
(``test_caller_runs.py``). The host runtime then runs the next call at once on
the calling thread instead, as the stream's next task, and skips the queued
form (``HostStream::run_now`` in ``csrc/runtime/host/host_stream.h``). These
tests prove that this keeps what a queued call gives: CPU's values, errors
reported at the next synchronization as on CUDA (not at the call), the
stream's order and pending state, the task's own thread-local state, and that
only the first call after such a wait runs at once: work queued ahead of a
wait stays asynchronous, and nothing runs at once under a capture or a
profiler's trace.
"""

from __future__ import annotations

import pytest
import torch

from infini_testing import DEV, RecordingMode, calls_run_at_once, drain_async_errors, hold, on_host

pytestmark = pytest.mark.skipif(not on_host(), reason="calls run at once are the host runtime's")


@pytest.fixture(autouse=True)
def _no_error_left_behind():
    drain_async_errors()
    yield
    drain_async_errors()


def _warm(x: torch.Tensor) -> None:
    """The first calls of the kinds used below (each kind's first call runs
    directly, before anything is learned about it), then a wait."""
    (x * 2).cpu()
    (x * 3).cpu()
    (x + x).cpu()
    torch.infini.synchronize()


def test_the_first_call_after_a_wait_runs_at_once_the_next_is_queued():
    a = torch.linspace(-3, 3, 64)
    x = a.to(DEV)
    _warm(x)
    before = calls_run_at_once()
    y = x * 2
    assert calls_run_at_once() == before + 1
    z = x * 3  # nothing waited for in between: queued
    w = x + y  # the add kernel's own path queues the same way
    assert calls_run_at_once() == before + 1
    torch.infini.synchronize()
    assert torch.equal(y.cpu(), a * 2)
    assert torch.equal(z.cpu(), a * 3)
    assert torch.equal(w.cpu(), a + a * 2)


@pytest.mark.parametrize("wait", ["synchronize", "stream", "item", "cpu", "event"])
def test_each_kind_of_wait_lets_the_next_call_run_at_once(wait):
    a = torch.linspace(-3, 3, 64)
    x = a.to(DEV)
    _warm(x)
    y = x * 2
    s = torch.infini.current_stream()
    if wait == "synchronize":
        torch.infini.synchronize()
    elif wait == "stream":
        s.synchronize()
    elif wait == "item":
        y[0].item()  # a read of one element: one task, the copy
    elif wait == "cpu":
        y.cpu()
    else:
        s.record_event().synchronize()
    before = calls_run_at_once()
    got = x + y
    assert calls_run_at_once() == before + 1
    assert torch.equal(got.cpu(), a + a * 2)


def test_a_loop_of_synchronous_calls_matches_cpu_and_runs_at_once():
    a = torch.linspace(-2, 2, 257)
    x, xc = a.to(DEV), a.clone()
    for factor in (1.5, -0.75):  # the kinds' first calls, run directly
        (x * factor).cpu()
    before = calls_run_at_once()
    for i in range(40):
        x = x * (1.5 if i % 2 else -0.75)
        xc = xc * (1.5 if i % 2 else -0.75)
        assert torch.equal(x.cpu(), xc)  # a wait for the copy, the one task pending
    assert calls_run_at_once() - before == 40


def test_work_queued_ahead_of_a_wait_stays_asynchronous():
    a = torch.linspace(-3, 3, 64)
    x = a.to(DEV)
    _warm(x)
    s = torch.infini.current_stream()
    before = calls_run_at_once()
    hold(s, 250)
    y = x * 2  # behind the held queue: queued, and the stream is pending
    assert calls_run_at_once() == before
    assert s.query() is False
    s.synchronize()
    assert torch.equal(y.cpu(), a * 2)


def test_an_error_of_a_call_run_at_once_is_reported_at_the_next_synchronization():
    x = torch.arange(4.0, device=DEV)
    x.index_select(0, torch.tensor([0, 1], device=DEV)).cpu()  # the kinds' first calls
    (x * 2).cpu()
    bad = torch.tensor([0, 99], device=DEV)
    with pytest.raises(IndexError, match="index out of range") as on_cpu:
        torch.arange(4.0).index_select(0, torch.tensor([0, 99]))
    torch.infini.synchronize()
    before = calls_run_at_once()
    x.index_select(0, bad)  # data-dependent: not raised at the call, as on CUDA
    assert calls_run_at_once() == before + 1
    after = x * 2  # later work still runs
    with pytest.raises(RuntimeError) as raised:
        torch.infini.synchronize()
    assert "aten::index_select" in str(raised.value)
    assert str(on_cpu.value).split("\n")[0] in str(raised.value)
    torch.infini.synchronize()  # reported once
    assert torch.equal(after.cpu(), torch.arange(4.0) * 2)


def _matmul_at_once_in(context, x: torch.Tensor):
    """``x @ x`` inside ``context()``, run at once: the kind's first call in
    that state first (run directly), then a wait with nothing pending.
    Returns the result and what entering the context gave."""
    with context():
        (x @ x).cpu()
    torch.infini.synchronize()
    before = calls_run_at_once()
    with context() as entered:
        got = x @ x
    assert calls_run_at_once() == before + 1
    return got, entered


def test_a_dispatch_mode_sees_the_call_not_the_cpu_kernel_run_for_it():
    a = torch.randn(16, 16)
    got, on_infini = _matmul_at_once_in(RecordingMode, a.to(DEV))
    with RecordingMode() as on_cpu:
        want = a @ a
    assert on_infini.ops == on_cpu.ops
    assert torch.equal(got.cpu(), want)


@pytest.mark.parametrize("context", ["no_grad", "inference_mode", "autocast"])
def test_the_callers_autograd_and_autocast_state_is_the_calls_own(context):
    # The state applies to the call as it does on CPU (autocast to CPU's
    # bfloat16 does not apply to an infini tensor), not to the CPU kernel run
    # for it.
    manager = {
        "no_grad": torch.no_grad,
        "inference_mode": torch.inference_mode,
        "autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16),
    }[context]
    a = torch.randn(16, 16)
    got, _ = _matmul_at_once_in(manager, a.to(DEV))
    with manager():
        want = a.to("meta") @ a.to("meta")  # what the call's metadata says
    assert got.dtype == torch.float32 == want.dtype
    assert torch.equal(got.cpu(), a @ a)


def test_nothing_runs_at_once_under_a_graph_capture():
    a = torch.linspace(-3, 3, 64)
    x = a.to(DEV)
    _warm(x)
    s = torch.infini.Stream()
    s.wait_stream(torch.infini.current_stream())
    g = torch.infini.InfiniGraph()
    with torch.infini.stream(s):
        (x * 2).cpu()  # a wait on the capturing stream, then the capture
        before = calls_run_at_once(s)
        with torch.infini.graph(g, stream=s):
            y = x * 2
        assert calls_run_at_once(s) == before
    g.replay()
    torch.infini.synchronize()
    assert torch.equal(y.cpu(), a * 2)


def test_nothing_runs_at_once_under_a_profilers_trace():
    a = torch.linspace(-3, 3, 64)
    x = a.to(DEV)
    _warm(x)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.PrivateUse1]) as prof:
        torch.infini.synchronize()
        before = calls_run_at_once()
        y = x * 2
        assert calls_run_at_once() == before
        torch.infini.synchronize()
    assert torch.equal(y.cpu(), a * 2)
    # Traced as the device work it is.
    kernels = {e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.PrivateUse1}
    assert any("aten::mul" in name for name in kernels), kernels
