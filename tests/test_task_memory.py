"""What a queued task keeps on the heap (the element-wise kernels' argument
records, a generic call's shared record) lives in task memory
(runtime/host/task_memory.h): made on the submitting thread, destroyed on the
stream's worker, and its block handed back to allocating threads instead of
freed there. These tests hold the blocks' users to CPU's results, and their
captured tensors to being released when the tasks end, while blocks move
between threads and streams, pile up behind holds past what a thread keeps,
and are copied by graph replays."""

from __future__ import annotations

import gc
import threading

import pytest
import torch

import torch_infini  # noqa: F401
from infini_testing import hold, on_host
from hang_guard import HANG_GUARD_S

DEV = torch.device("infini:0")

pytestmark = pytest.mark.skipif(not on_host(), reason="task memory is the host runtime's")


def steps(t: torch.Tensor, other: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """``n`` order-sensitive in-place steps: an add with alpha (its arguments
    kept on the heap), a generic-kernel mul and remainder (a shared call
    record each), and a dropped out-of-place result per step."""
    for i in range(n):
        t.add_(other, alpha=i + seed).mul_(3).remainder_(1000003)
        torch.mul(t, 2)  # an output made and dropped while queued
    return t


def produce(stream: torch.Stream, t: torch.Tensor, other: torch.Tensor, n: int, seed: int) -> threading.Thread:
    def run() -> None:
        with torch.infini.stream(stream):
            hold(stream, 30)  # the tasks pile up behind it
            steps(t, other, n, seed)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_tasks_of_threads_on_streams_behind_holds_match_cpu_and_release_their_tensors():
    torch.infini.synchronize()
    gc.collect()
    base = torch.infini.memory_allocated()
    # Four tasks a step: more blocks come back at once than a thread keeps
    # (1024 per size class), so the surplus goes back to malloc.
    n = 700
    streams = [torch.infini.Stream() for _ in range(3)]
    # Made from CPU tensors: a scalar operand on the device would be cached
    # (ops/scalar_cache.h) and counted below.
    xs = [(torch.arange(5, dtype=torch.int64) + k).to(DEV) for k in range(3)]
    others = [(torch.arange(5, dtype=torch.int64) * (k + 2)).to(DEV) for k in range(3)]
    for s in streams:
        s.wait_stream(torch.infini.current_stream())
    for round_ in range(2):  # the second round reuses the first's blocks
        threads = [produce(s, x, o, n, round_ * 10 + k) for k, (s, x, o) in enumerate(zip(streams, xs, others))]
        for thread in threads:
            thread.join(timeout=HANG_GUARD_S)
            assert not thread.is_alive()
        for s in streams:
            s.synchronize()
    for k in range(3):
        expected = torch.arange(5, dtype=torch.int64) + k
        for round_ in range(2):
            steps(expected, others[k].cpu(), n, round_ * 10 + k)
        assert torch.equal(xs[k].cpu(), expected), k
    del xs, others, threads
    gc.collect()
    torch.infini.synchronize()
    # Every dropped output and every tensor a task held is back.
    assert torch.infini.memory_allocated() == base


def test_graph_replays_copy_heap_kept_tasks_as_cpu_runs_them():
    x = torch.arange(6, dtype=torch.int64, device=DEV)
    other = torch.full((6,), 7, dtype=torch.int64, device=DEV)
    s = torch.infini.Stream()
    s.wait_stream(torch.infini.current_stream())
    graph = torch.infini.InfiniGraph()
    with torch.infini.graph(graph, stream=s):
        steps(x, other, 40, 3)
    expected = torch.arange(6, dtype=torch.int64)
    x.copy_(expected.to(DEV))
    for _ in range(5):
        graph.replay()
        steps(expected, other.cpu(), 40, 3)
    torch.infini.synchronize()
    assert torch.equal(x.cpu(), expected)
    del graph

