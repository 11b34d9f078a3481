"""Graph capture contracts: torch.cuda.graph / graph_pool_handle /
make_graphed_callables semantics, through ``mod`` only (tests/test_graphs.py
has the detailed tests of the infini implementation). Where the provider has
no graph capture, these check the clear refusal instead."""

from __future__ import annotations

import pytest
import torch

import torch_infini


def _captures(backend: str) -> bool:
    return backend == "cuda" or torch_infini.diagnostics()["capabilities"]["graphs"]


def _graph_class(mod):
    return mod.CUDAGraph if mod is torch.cuda else mod.InfiniGraph


@pytest.mark.covers("graph")
def test_graph_context_captures_and_replays(mod, dev, backend):
    x = torch.zeros(4, device=dev)
    x.add_(0)
    g = _graph_class(mod)()
    if not _captures(backend):
        with pytest.raises(RuntimeError, match="graphs=no"):
            with mod.graph(g):
                x.add_(1)
        return
    with mod.graph(g):
        assert mod.is_current_stream_capturing()
        x.add_(1)
    mod.synchronize()
    assert torch.equal(x.cpu(), torch.zeros(4))  # captured, not run
    g.replay()
    g.replay()
    assert torch.equal(x.cpu(), torch.full((4,), 2.0))


@pytest.mark.covers("graph_pool_handle")
def test_graph_pool_handle_is_shared_by_graphs(mod, dev, backend):
    pool = mod.graph_pool_handle()
    assert pool != mod.graph_pool_handle()
    if not _captures(backend):
        return
    x = torch.ones(8, device=dev)
    x.mul_(1)
    g1, g2 = _graph_class(mod)(), _graph_class(mod)()
    with mod.graph(g1, pool=pool):
        y1 = x * 2
    with mod.graph(g2, pool=g1.pool()):
        y2 = x * 3
    assert g1.pool() == g2.pool() == pool
    g1.replay()
    g2.replay()
    assert torch.equal(y1.cpu(), torch.full((8,), 2.0))
    assert torch.equal(y2.cpu(), torch.full((8,), 3.0))


@pytest.mark.covers("make_graphed_callables")
def test_make_graphed_callables_is_a_drop_in_replacement(mod, dev, backend):
    if not _captures(backend):
        pytest.skip("the provider has no graph capture (test_graph_context_captures_and_replays covers the refusal)")
    torch.manual_seed(0)
    lin = torch.nn.Linear(3, 2).to(dev)
    ref = torch.nn.Linear(3, 2).to(dev)
    ref.load_state_dict(lin.state_dict())
    graphed = mod.make_graphed_callables(lin, (torch.randn(4, 3, device=dev, requires_grad=True),))
    x = torch.randn(4, 3, device=dev)
    y, expected = graphed(x), ref(x)
    torch.testing.assert_close(y, expected)
    y.sum().backward()
    expected.sum().backward()
    torch.testing.assert_close(lin.weight.grad, ref.weight.grad)
