"""nn.LSTM / nn.GRU on infini: the fused cells PyTorch calls for a PrivateUse1
device (csrc/ops/rnn_cells.cpp), forward and backward against CPU, and on the
host runtime one queued call per cell (not a dozen operators each), and
nn.LSTM's whole sequence as CPU runs it (oneDNN's LSTM, one call per layer)."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_infini
from infini_testing import DEV, fallback_where_unserved, on_host

TOL = dict(rtol=1e-4, atol=1e-5)


def _pair(cls, **kwargs):
    torch.manual_seed(0)
    cpu = cls(**kwargs)
    dev = cls(**kwargs).to(DEV)
    dev.load_state_dict(cpu.state_dict())
    return cpu, dev


def _check_grads(cpu: torch.nn.Module, dev: torch.nn.Module) -> None:
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, **TOL, msg=name)


@pytest.mark.parametrize("cls", [torch.nn.LSTM, torch.nn.GRU], ids=["lstm", "gru"])
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_rnn_matches_cpu_forward_and_backward(cls, bias, bidirectional):
    cpu, dev = _pair(cls, input_size=6, hidden_size=8, num_layers=2, bias=bias,
                     bidirectional=bidirectional, batch_first=True)
    x = torch.randn(3, 4, 6, generator=torch.Generator().manual_seed(1))
    with fallback_where_unserved():
        out, state = dev(x.to(DEV))
        (out.sum() + (state[0] if isinstance(state, tuple) else state).sum()).backward()
    out_cpu, state_cpu = cpu(x)
    (out_cpu.sum() + (state_cpu[0] if isinstance(state_cpu, tuple) else state_cpu).sum()).backward()
    torch.testing.assert_close(out.cpu(), out_cpu, **TOL)
    _check_grads(cpu, dev)


@pytest.mark.parametrize("cls", [torch.nn.LSTMCell, torch.nn.GRUCell], ids=["lstm_cell", "gru_cell"])
def test_cells_match_cpu(cls):
    cpu, dev = _pair(cls, input_size=5, hidden_size=7)
    x = torch.randn(4, 5, generator=torch.Generator().manual_seed(2))
    with fallback_where_unserved():
        y = dev(x.to(DEV))
        (y[0] if isinstance(y, tuple) else y).square().sum().backward()
    y_cpu = cpu(x)
    (y_cpu[0] if isinstance(y_cpu, tuple) else y_cpu).square().sum().backward()
    torch.testing.assert_close((y[0] if isinstance(y, tuple) else y).cpu(),
                               y_cpu[0] if isinstance(y_cpu, tuple) else y_cpu, **TOL)
    _check_grads(cpu, dev)


@pytest.mark.skipif(not on_host(), reason="the host runtime's one-call cells")
@pytest.mark.parametrize("cls,cell,shape,steps", [(torch.nn.GRU, "gru", (3, 2, 4), 3),
                                                  (torch.nn.LSTMCell, "lstm", (2, 4), 1)],
                         ids=["gru", "lstm_cell"])
def test_each_cell_is_one_call_on_the_host_runtime(cls, cell, shape, steps):
    _, dev = _pair(cls, input_size=4, hidden_size=4)
    x = torch.randn(*shape, device=DEV)
    calls = _calls_of_second_run(lambda: _first(dev(x)).sum().backward())
    assert calls.get(f"infini_host::_thnn_fused_{cell}_cell") == steps, calls  # one per time step
    # the cell's pointwise operators are inside those calls, not queued one by one
    assert calls.get("aten::sigmoid") is None and calls.get("aten::tanh") is None, calls


@pytest.mark.skipif(not on_host(), reason="the host runtime runs nn.LSTM as CPU does")
@pytest.mark.parametrize("bidirectional", [False, True], ids=["uni", "bi"])
def test_lstm_runs_as_cpu_on_the_host_runtime(bidirectional):
    """float32 nn.LSTM takes CPU's oneDNN path: one mkldnn_rnn_layer per layer
    and direction, and one backward each; no per-step cells, and the values
    and gradients are CPU's exactly. With projections CPU takes the per-step
    path, and so does infini."""
    cpu, dev = _pair(torch.nn.LSTM, input_size=4, hidden_size=6, num_layers=2,
                     bidirectional=bidirectional)
    x = torch.randn(5, 2, 4, generator=torch.Generator().manual_seed(3))
    calls = _calls_of_second_run(lambda: dev(x.to(DEV))[0].sum().backward())
    layers = 2 * (2 if bidirectional else 1)
    assert calls.get("aten::mkldnn_rnn_layer") == layers, calls
    assert calls.get("aten::mkldnn_rnn_layer_backward") == layers, calls
    assert calls.get("infini_host::_thnn_fused_lstm_cell") is None, calls
    for p in dev.parameters():
        p.grad = None
    out = dev(x.to(DEV))[0]
    out.sum().backward()
    out_cpu = cpu(x)[0]
    out_cpu.sum().backward()
    torch.testing.assert_close(out.cpu(), out_cpu, rtol=0, atol=0)
    _check_grads(cpu, dev)

    projected_cpu, projected = _pair(torch.nn.LSTM, input_size=4, hidden_size=6, proj_size=3)
    calls = _calls_of_second_run(lambda: projected(x.to(DEV))[0].sum().backward())
    assert calls.get("infini_host::_thnn_fused_lstm_cell") == 5, calls
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CPU's "projections are not supported with oneDNN"
        want = projected_cpu(x)[0]
    torch.testing.assert_close(projected(x.to(DEV))[0].cpu(), want, **TOL)


def _first(value):
    return value[0] if isinstance(value, tuple) else value


def _calls_of_second_run(run) -> dict:
    """Operator call counts of run()'s second call (the first makes the first
    calls of each kind)."""
    run()
    torch_infini.fallback.reset_coverage()
    torch_infini.fallback.start_recording()
    try:
        run()
        torch.infini.synchronize()
    finally:
        torch_infini.fallback.stop_recording()
    return {row["op"]: row["calls"] for row in torch_infini.fallback.coverage()}
