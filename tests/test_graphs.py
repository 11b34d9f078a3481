"""Graph capture and replay (torch.infini.InfiniGraph, graph, make_graphed_callables,
torch.accelerator.Graph) with torch.cuda.graphs' semantics; CPU PyTorch is the oracle.

Capture needs a provider with capabilities.graphs (the host runtime; the Infini
stack where InfiniRT's backend captures): elsewhere the refusal is tested instead.
"""

from __future__ import annotations

import copy
import faulthandler

import pytest
import torch

import torch_infini
from hang_guard import HANG_GUARD_S

GRAPHS = torch_infini.diagnostics()["capabilities"]["graphs"]
needs_graphs = pytest.mark.skipif(not GRAPHS, reason="the provider has no graph capture (capabilities.graphs=no): "
                                  "test_capture_is_refused_without_graphs covers it")
DEV = "infini"


@pytest.fixture(autouse=True)
def _bounded():
    """A capture that never ends would hang: bound every test (the process exits with a traceback)."""
    faulthandler.dump_traceback_later(120, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def mlp(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                               torch.nn.Linear(32, 4))


def warm_up(fn, iters: int = 3) -> None:
    """As torch.cuda's docs do: run a few iterations on a side stream before capturing."""
    s = torch.infini.Stream()
    s.wait_stream(torch.infini.current_stream())
    with torch.infini.stream(s):
        for _ in range(iters):
            fn()
    torch.infini.current_stream().wait_stream(s)


@pytest.mark.skipif(GRAPHS, reason="the provider captures graphs")
def test_capture_is_refused_without_graphs():
    g = torch.infini.InfiniGraph()
    with pytest.raises(RuntimeError, match="capabilities.graphs=no"):
        with torch.infini.graph(g):
            torch.ones(4, device=DEV).add_(1)
    assert not torch.infini.is_current_stream_capturing()


@needs_graphs
def test_capture_records_without_running_and_replay_runs_in_order():
    x = torch.zeros(8, device=DEV)
    x.add_(0)  # first call of the kind outside the capture
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g):
        assert torch.infini.is_current_stream_capturing()
        x.add_(1)
        x.mul_(3)
    assert not torch.infini.is_current_stream_capturing()
    torch.infini.synchronize()
    assert torch.equal(x.cpu(), torch.zeros(8)), "capture ran the work"
    g.replay()
    assert torch.equal(x.cpu(), torch.full((8,), 3.0))
    g.replay()
    g.replay()
    assert torch.equal(x.cpu(), torch.full((8,), 39.0))  # ((3 + 1) * 3 + 1) * 3


@needs_graphs
def test_mlp_forward_replays_match_eager_with_new_inputs():
    model = mlp().to(DEV)
    oracle = mlp()
    static_x = torch.randn(5, 16, device=DEV)
    warm_up(lambda: model(static_x))
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g):
        static_y = model(static_x)
    for i in range(10):
        x = torch.randn(5, 16, generator=torch.Generator().manual_seed(100 + i))
        static_x.copy_(x.to(DEV))
        g.replay()
        torch.testing.assert_close(static_y.cpu(), oracle(x).detach(), rtol=1e-5, atol=1e-6)


@needs_graphs
def test_first_call_of_a_kind_is_captured_not_run_directly():
    # Shapes no other test uses: the generic kernel has not learned them, so
    # outside a capture their first call would run directly (synchronizing).
    a = torch.randn(3, 7, 11, device=DEV)
    b = torch.randn(11, 5, device=DEV)
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g):
        out = torch.matmul(a, b).softmax(-1).cumsum(1)
    for i in range(3):
        na, nb = torch.randn(3, 7, 11), torch.randn(11, 5)
        a.copy_(na.to(DEV))
        b.copy_(nb.to(DEV))
        g.replay()
        torch.testing.assert_close(out.cpu(), torch.matmul(na, nb).softmax(-1).cumsum(1), rtol=1e-5, atol=1e-5)


def train_step(model, opt, x, t):
    opt.zero_grad(set_to_none=False)
    loss = torch.nn.functional.mse_loss(model(x), t)
    loss.backward()
    opt.step()
    return loss


@needs_graphs
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_training_step_replays_match_eager(optimizer):
    def make(params):
        if optimizer == "adam":
            return torch.optim.Adam(params, lr=1e-2, capturable=True)
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)

    def make_cpu(params):
        if optimizer == "adam":
            return torch.optim.Adam(params, lr=1e-2)
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)

    model, oracle = mlp(1).to(DEV), mlp(1)
    opt, opt_cpu = make(model.parameters()), make_cpu(oracle.parameters())
    gen = torch.Generator().manual_seed(7)
    batches = [(torch.randn(6, 16, generator=gen), torch.randn(6, 4, generator=gen)) for _ in range(13)]
    static_x = batches[0][0].to(DEV)
    static_t = batches[0][1].to(DEV)
    # Warm-up steps (also eager on the CPU oracle), then the captured step.
    for x, t in batches[:3]:
        static_x.copy_(x.to(DEV))
        static_t.copy_(t.to(DEV))
        warm_up(lambda: train_step(model, opt, static_x, static_t), iters=1)
        train_step(oracle, opt_cpu, x, t)
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g):
        static_loss = train_step(model, opt, static_x, static_t)
    for x, t in batches[3:]:
        static_x.copy_(x.to(DEV))
        static_t.copy_(t.to(DEV))
        g.replay()
        loss = train_step(oracle, opt_cpu, x, t)
        torch.testing.assert_close(static_loss.cpu(), loss.detach(), rtol=1e-4, atol=1e-5)
        for p, q in zip(model.parameters(), oracle.parameters()):
            torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-5)


def capture_error(body, mode: str = "global"):
    """Runs ``body`` inside a capture; returns the error it raised (the capture ends invalidated)."""
    g = torch.infini.InfiniGraph()
    x = torch.ones(4, device=DEV)
    x.add_(1)
    with pytest.raises(RuntimeError) as ended:
        with torch.infini.graph(g, capture_error_mode=mode):
            x.add_(1)
            body(x)
    # capture_end reports the invalidated capture; the call's own error is its context.
    assert "operation failed due to a previous error during capture" in str(ended.value)
    assert not torch.infini.is_current_stream_capturing()
    assert torch.equal(x.cpu(), torch.full((4,), 2.0)), "captured work ran"
    # The instance can capture again.
    with torch.infini.graph(g):
        x.add_(1)
    g.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 3.0))
    return ended.value.__context__


@needs_graphs
@pytest.mark.parametrize("call", ["device_synchronize", "stream_synchronize", "item", "cpu", "stream_query",
                                  "event_query", "event_synchronize"])
def test_synchronizing_calls_raise_and_invalidate_the_capture(call):
    def body(x):
        if call == "device_synchronize":
            torch.infini.synchronize()
        elif call == "stream_synchronize":
            torch.infini.current_stream().synchronize()
        elif call == "item":
            x.sum().item()
        elif call == "cpu":
            x.cpu()
        elif call == "stream_query":
            torch.infini.current_stream().query()
        else:
            e = torch.infini.Event()
            e.record()
            e.query() if call == "event_query" else e.synchronize()

    error = capture_error(body)
    assert isinstance(error, RuntimeError)
    assert "operation not permitted when stream is capturing" in str(error)


@needs_graphs
def test_data_dependent_operator_raises_naming_it():
    error = capture_error(lambda x: torch.nonzero(x))
    assert "aten::nonzero" in str(error) and "cannot be captured" in str(error)


@needs_graphs
@pytest.mark.parametrize("case", ["max_of_empty", "index_select_out_is_its_input", "gather_out_is_its_input"])
def test_errors_cpu_raises_where_meta_functions_do_not_look_are_raised_at_capture(case):
    """A capture lays calls out by meta functions, as the Infini stack does
    every call: an error CPU raises that its meta function does not (max()
    of no elements; an output that is the memory of an input) is still
    raised at the call, with CPU's type and message."""
    calls = {
        "max_of_empty": lambda x, index: x[:0].max(),
        "index_select_out_is_its_input": lambda x, index: torch.index_select(x.view(2, 2), 0, index[0],
                                                                             out=x.view(2, 2)),
        "gather_out_is_its_input": lambda x, index: torch.gather(x.view(2, 2), 0, index, out=x.view(2, 2)),
    }
    index = torch.tensor([[1, 0], [0, 1]])
    with pytest.raises(Exception) as cpu:
        calls[case](torch.ones(4), index)
    x, on_device = torch.ones(4, device=DEV), index.to(DEV)
    g = torch.infini.InfiniGraph()
    with pytest.raises(type(cpu.value)) as infini:  # as a host-side check on CUDA: the capture itself ends
        with torch.infini.graph(g):
            calls[case](x, on_device)
    assert str(infini.value) == str(cpu.value)
    assert not torch.infini.is_current_stream_capturing()
    assert torch.equal(x.cpu(), torch.ones(4))


@needs_graphs
def test_a_call_cpu_refuses_where_meta_functions_do_not_look_is_refused_every_time():
    """CPU's check of a call reading only empty tensors is made before the
    call's layouts are cached: the same call again, in a second capture or
    after it, raises CPU's error as the first did, and is never queued from
    the cache."""
    with pytest.raises(RuntimeError) as cpu:
        torch.ones(4)[:0].max()
    x = torch.ones(4, device=DEV)
    for _ in range(2):
        g = torch.infini.InfiniGraph()
        with pytest.raises(RuntimeError) as captured:
            with torch.infini.graph(g):
                x[:0].max()
        assert str(captured.value) == str(cpu.value)
    for _ in range(2):
        with pytest.raises(RuntimeError) as eager:
            x[:0].max()
        assert str(eager.value) == str(cpu.value)
    torch.infini.synchronize()


@needs_graphs
def test_random_operator_raises_naming_it():
    error = capture_error(lambda x: x.uniform_())
    assert "cannot be captured" in str(error) and "random" in str(error)


@needs_graphs
def test_capture_modes_for_unrelated_streams():
    other = torch.infini.Stream(priority=-1)  # not the capture stream (pool streams are shared)
    # global: synchronizing any stream is refused while the capture is underway
    error = capture_error(lambda x: other.synchronize(), mode="global")
    assert "global" in str(error)
    # relaxed: an unrelated stream may synchronize
    g = torch.infini.InfiniGraph()
    x = torch.ones(4, device=DEV)
    with torch.infini.graph(g, capture_error_mode="relaxed"):
        x.add_(1)
        other.synchronize()
    g.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))


@needs_graphs
def test_capture_on_the_default_stream_is_refused():
    g = torch.infini.InfiniGraph()
    with pytest.raises(RuntimeError, match="non-default stream"):
        g.capture_begin()
    assert not torch.infini.is_current_stream_capturing()


@needs_graphs
def test_replay_without_capture_and_bad_mode_raise():
    g = torch.infini.InfiniGraph()
    with pytest.raises(RuntimeError, match="without a preceding successful capture"):
        g.replay()
    with torch.infini.stream(torch.infini.Stream()):
        with pytest.raises(RuntimeError, match="capture_error_mode"):
            g.capture_begin(capture_error_mode="sometimes")


@needs_graphs
def test_forked_stream_joins_the_capture():
    x = torch.ones(16, device=DEV)
    y = torch.ones(16, device=DEV)
    x.mul_(1)
    side = torch.infini.Stream()
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g):
        main = torch.infini.current_stream()
        x.mul_(2)
        side.wait_stream(main)  # fork: side joins the capture
        with torch.infini.stream(side):
            y.add_(x)
        main.wait_stream(side)  # join back
        x.add_(y)
    torch.infini.synchronize()
    assert torch.equal(y.cpu(), torch.ones(16)), "the forked stream's captured work ran"
    g.replay()
    assert torch.equal(y.cpu(), torch.full((16,), 3.0))
    assert torch.equal(x.cpu(), torch.full((16,), 5.0))


@needs_graphs
def test_unjoined_fork_fails_capture_end():
    x = torch.ones(4, device=DEV)
    x.mul_(1)
    # Streams come from a round-robin pool (as CUDA's do): after enough
    # Stream() calls the side stream could be the capture stream itself, so
    # the capture stream is given explicitly and distinct.
    side = torch.infini.Stream()
    capture = torch.infini.Stream()
    while capture == side:
        capture = torch.infini.Stream()
    g = torch.infini.InfiniGraph()
    with pytest.raises(RuntimeError, match="unjoined"):
        with torch.infini.graph(g, stream=capture):
            side.wait_stream(torch.infini.current_stream())
            with torch.infini.stream(side):
                x.mul_(2)
    assert not torch.infini.is_current_stream_capturing()
    side.synchronize()  # no longer capturing


def allocations() -> int:
    return torch.infini.memory_stats()["allocation.all.allocated"]


@needs_graphs
def test_replays_allocate_nothing_and_keep_the_pool():
    model = mlp().to(DEV)
    static_x = torch.randn(64, 16, device=DEV)
    warm_up(lambda: model(static_x))
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g):
        static_y = model(static_x)
    torch.infini.synchronize()
    torch.infini.empty_cache()  # the graph's pool is not returned while the graph lives
    before, reserved = allocations(), torch.infini.memory_reserved()
    assert reserved > 0
    for _ in range(10):
        g.replay()
    torch.infini.synchronize()
    torch.infini.empty_cache()
    assert allocations() == before
    assert torch.infini.memory_reserved() == reserved
    torch.testing.assert_close(static_y, model(static_x))
    # Reset and drop the outputs: the pool's memory goes back at empty_cache.
    g.reset()
    del static_y
    torch.infini.empty_cache()
    assert torch.infini.memory_reserved() < reserved


@needs_graphs
def test_graphs_share_a_pool():
    model = mlp().to(DEV)
    static_x = torch.randn(64, 16, device=DEV)
    warm_up(lambda: model(static_x))
    pool = torch.infini.graph_pool_handle()
    g1, g2, g3 = torch.infini.InfiniGraph(), torch.infini.InfiniGraph(), torch.infini.InfiniGraph()
    with torch.infini.graph(g1, pool=pool):
        y1 = model(static_x)
    assert g1.pool() == pool
    reserved = torch.infini.memory_reserved()
    # A second graph in the same pool reuses the blocks the first one freed.
    with torch.infini.graph(g2, pool=g1.pool()):
        y2 = model(static_x * 2)
    assert torch.infini.memory_reserved() == reserved
    # A graph with a pool of its own needs memory of its own.
    with torch.infini.graph(g3):
        y3 = model(static_x)
    assert g3.pool() != pool
    assert torch.infini.memory_reserved() > reserved
    g1.replay()
    g2.replay()
    g3.replay()
    torch.testing.assert_close(y2, model(static_x * 2))
    torch.testing.assert_close(y3, model(static_x))
    del y1


@needs_graphs
def test_make_graphed_callables_matches_eager_forward_and_backward():
    module = mlp(3).to(DEV)
    eager = copy.deepcopy(module)
    sample = torch.randn(4, 16, device=DEV, requires_grad=True)
    graphed = torch.infini.make_graphed_callables(module, (sample,))
    for i in range(3):
        # As in a training loop: the gradients a replay returns live in the
        # graph's static buffers, so they are consumed before the next one.
        module.zero_grad(set_to_none=True)
        eager.zero_grad(set_to_none=True)
        x = torch.randn(4, 16, generator=torch.Generator().manual_seed(i)).to(DEV)
        xg, xe = x.clone().requires_grad_(), x.clone().requires_grad_()
        yg, ye = graphed(xg), eager(xe)
        torch.testing.assert_close(yg, ye)
        (yg * yg).sum().backward()
        (ye * ye).sum().backward()
        torch.testing.assert_close(xg.grad, xe.grad)
        for p, q in zip(module.parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, q.grad, rtol=1e-5, atol=1e-6)
    # eval mode runs the module's own forward
    module.eval()
    eager.eval()
    torch.testing.assert_close(module(x), eager(x))


@needs_graphs
def test_accelerator_graph_uses_the_infini_graph():
    x = torch.zeros(4, device=DEV)
    x.add_(0)
    g = torch.accelerator.Graph()
    with torch.infini.stream(torch.infini.Stream()):
        with g:
            x.add_(2)
    g.replay()  # on the default stream
    g.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 4.0))


@needs_graphs
def test_keep_graph_and_debug_dump(tmp_path):
    x = torch.zeros(4, device=DEV)
    x.add_(0)
    g = torch.infini.InfiniGraph(keep_graph=True)
    g.enable_debug_mode()
    with torch.infini.graph(g):
        x.add_(1)
        e = torch.infini.Event()
        e.record()
    g.instantiate()
    g.replay()
    assert torch.equal(x.cpu(), torch.ones(4))
    path = tmp_path / "graph.txt"
    g.debug_dump(str(path))
    text = path.read_text()
    assert "kernel or copy" in text and "event record" in text
    e.synchronize()  # re-recorded by the replay: a real record now


@needs_graphs
def test_thread_local_mode_lets_other_threads_synchronize():
    import threading

    other = torch.infini.Stream(priority=-1)
    x = torch.zeros(4, device=DEV)
    x.add_(0)
    done = []
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g, capture_error_mode="thread_local"):
        x.add_(1)
        t = threading.Thread(target=lambda: (other.synchronize(), done.append(True)))
        t.start()
        t.join(timeout=HANG_GUARD_S)
    assert done == [True]
    g.replay()
    assert torch.equal(x.cpu(), torch.ones(4))


@needs_graphs
def test_replayed_kernel_errors_reach_the_next_synchronization():
    x = torch.zeros(4, device=DEV)
    idx = torch.tensor([0, 1], device=DEV)
    x[idx]
    g = torch.infini.InfiniGraph()
    with torch.infini.graph(g):
        y = x[idx]
    idx.copy_(torch.tensor([0, 7]).to(DEV))  # out of range when the graph runs
    g.replay()
    with pytest.raises(RuntimeError, match="out of bounds"):
        torch.infini.synchronize()
    idx.copy_(torch.tensor([3, 2]).to(DEV))
    x.copy_(torch.arange(4.0).to(DEV))
    g.replay()
    assert torch.equal(y.cpu(), torch.tensor([3.0, 2.0]))


@needs_graphs
def test_a_graph_deleted_mid_capture_ends_its_capture():
    x = torch.zeros(4, device=DEV)
    x.add_(0)
    side = torch.infini.Stream(priority=-1)
    with torch.infini.stream(side):
        g = torch.infini.InfiniGraph()
        g.capture_begin()
        x.add_(1)  # recorded
        assert torch.infini.is_current_stream_capturing()
        del g
        assert not torch.infini.is_current_stream_capturing()
        x.add_(2)  # runs
    torch.infini.synchronize()
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))
