"""Stress: random generators under threads and streams. The numbers equal
the CPU's for the same seed and the same sequence of draws, bit for bit."""

from __future__ import annotations

import threading

import pytest
import torch

import torch_infini  # noqa: F401
from infini_testing import hold, on_host
from stress_helpers import run_threads

DEV = torch.device("infini:0")

pytestmark = pytest.mark.usefixtures("rng_states_kept")


def draws(device, generator, count: int) -> list[torch.Tensor]:
    out = []
    for i in range(count):
        if i % 3 == 0:
            out.append(torch.rand(37, device=device, generator=generator))
        elif i % 3 == 1:
            out.append(torch.randn(20, device=device, generator=generator))
        else:
            out.append(torch.randint(0, 1000, (9,), device=device, generator=generator))
    return out


def test_a_generator_per_thread_and_stream_matches_the_cpu():
    results = {}

    def work(k):
        g = torch.Generator(DEV).manual_seed(1000 + k)
        s = torch.infini.Stream()
        with torch.infini.stream(s):
            got = draws(DEV, g, 120)
        s.synchronize()
        results[k] = [t.cpu() for t in got]

    run_threads(work, 4)
    for k in range(4):
        want = draws("cpu", torch.Generator().manual_seed(1000 + k), 120)
        for g, w in zip(results[k], want):
            assert torch.equal(g, w), k


def test_the_default_generator_shared_by_threads_hands_out_whole_draws():
    """Threads drawing from the default generator at once: each draw must be
    one whole, uncorrupted chunk of the sequence the CPU generator gives for
    the same number of equal draws (the order between threads is free)."""
    threads, per_thread, size = 4, 100, 64
    torch.infini.manual_seed(77)
    got = []
    lock = threading.Lock()

    def work(_):
        s = torch.infini.Stream()
        mine = []
        with torch.infini.stream(s):
            for _ in range(per_thread):
                mine.append(torch.rand(size, device=DEV))
        s.synchronize()
        with lock:
            got.extend(t.cpu() for t in mine)

    run_threads(work, threads)
    cpu = torch.Generator().manual_seed(77)
    want = [torch.rand(size, generator=cpu) for _ in range(threads * per_thread)]
    key = lambda t: tuple(t.tolist())  # noqa: E731
    assert sorted(map(key, got)) == sorted(map(key, want))


@pytest.mark.skipif(not on_host(), reason="holds a stream with the host runtime's test hook")
def test_reseeding_while_draws_are_queued_affects_only_later_draws():
    g = torch.Generator(DEV).manual_seed(5)
    s = torch.infini.Stream()
    with torch.infini.stream(s):
        hold(s, 50)
        first = [torch.rand(100, device=DEV, generator=g) for _ in range(20)]
        g.manual_seed(6)  # the queued draws already own their state
        second = [torch.rand(100, device=DEV, generator=g) for _ in range(20)]
    s.synchronize()
    cpu5, cpu6 = torch.Generator().manual_seed(5), torch.Generator().manual_seed(6)
    for t in first:
        assert torch.equal(t.cpu(), torch.rand(100, generator=cpu5))
    for t in second:
        assert torch.equal(t.cpu(), torch.rand(100, generator=cpu6))


def test_state_round_trips_under_concurrent_draws():
    """get_state/set_state of one generator while other threads draw from
    their own: replaying from the saved state gives the same numbers."""
    def work(k):
        g = torch.Generator(DEV).manual_seed(k)
        for _ in range(30):
            state = g.get_state()
            a = torch.randn(50, device=DEV, generator=g)
            g.set_state(state)
            b = torch.randn(50, device=DEV, generator=g)
            assert torch.equal(a.cpu(), b.cpu())

    run_threads(work, 4)
