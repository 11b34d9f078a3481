"""nn.RNN / nn.LSTM / nn.GRU and their cells on infini, forward and backward
against CPU. On the host runtime they compute as CPU does, bit for bit
(csrc/ops/nn/rnn_as_cpu.cpp: CPU's algorithm, not the fused cells PyTorch picks
for a PrivateUse1 device), and float32 nn.LSTM runs CPU's oneDNN LSTM, one
call per layer. Elsewhere the fused cells (csrc/ops/nn/rnn_cells.cpp) run."""

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


def _exact_pair(cls, dtype, **kwargs):
    cpu, dev = _pair(cls, **kwargs)
    return cpu.to(dtype), dev.to(dtype)


def _run_and_backward(module, x, h=None):
    out = module(x) if h is None else module(x, h)
    first = _first(out)
    first.float().square().sum().backward()
    return first


@pytest.mark.skipif(not on_host(), reason="the host runtime computes RNNs as CPU does")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("cls,kwargs,shape", [
    (torch.nn.GRU, dict(num_layers=2, bidirectional=True), (5, 3, 4)),
    (torch.nn.GRU, dict(batch_first=True, bias=False), (3, 5, 4)),
    (torch.nn.RNN, dict(num_layers=2, nonlinearity="tanh"), (5, 3, 4)),
    (torch.nn.RNN, dict(nonlinearity="relu", bidirectional=True), (5, 3, 4)),
    (torch.nn.LSTM, dict(num_layers=2, bidirectional=True), (5, 3, 4)),   # bfloat16: no oneDNN
    (torch.nn.LSTM, dict(proj_size=3), (5, 3, 4)),                          # projections: per step
    (torch.nn.GRUCell, {}, (3, 4)),
    (torch.nn.LSTMCell, {}, (3, 4)),
    (torch.nn.RNNCell, dict(nonlinearity="relu"), (3, 4)),
], ids=["gru-2layer-bi", "gru-batch_first-nobias", "rnn_tanh-2layer", "rnn_relu-bi", "lstm-2layer-bi",
        "lstm-proj", "gru_cell", "lstm_cell", "rnn_relu_cell"])
def test_rnns_are_bit_identical_to_cpu_on_the_host_runtime(cls, kwargs, shape, dtype):
    """The composites' CPU algorithm (the input's gates for the whole sequence
    in one linear, CPU's cells), not the fused cells PyTorch picks for a
    PrivateUse1 device: outputs and every gradient equal CPU's bit for bit,
    in float32 and bfloat16 (the fused cells differed by up to 0.047)."""
    cpu, dev = _exact_pair(cls, dtype, input_size=4, hidden_size=6, **kwargs)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(4)).to(dtype)
    xd = x.to(DEV).requires_grad_()
    xc = x.clone().requires_grad_()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CPU's "projections are not supported with oneDNN"
        want = _run_and_backward(cpu, xc)
    got = _run_and_backward(dev, xd)
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)
    torch.testing.assert_close(xd.grad.cpu(), xc.grad, rtol=0, atol=0)
    for (name, p), q in zip(cpu.named_parameters(), dev.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, rtol=0, atol=0, msg=name)


@pytest.mark.skipif(not on_host(), reason="the host runtime computes RNNs as CPU does")
def test_gru_with_dropout_between_layers_draws_as_cpu(rng_states_kept):
    cpu, dev = _pair(torch.nn.GRU, input_size=4, hidden_size=5, num_layers=3, dropout=0.5)
    x = torch.randn(6, 2, 4, generator=torch.Generator().manual_seed(5))
    torch.manual_seed(11)
    want = cpu(x)[0]
    torch.manual_seed(11)
    got = dev(x.to(DEV))[0]
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


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
    assert calls.get("aten::mkldnn_rnn_layer") is None, calls
    assert calls.get("infini_host::_thnn_fused_lstm_cell") is None, calls  # CPU's cells, not fused ones
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # CPU's "projections are not supported with oneDNN"
        want = projected_cpu(x)[0]
    torch.testing.assert_close(projected(x.to(DEV))[0].cpu(), want, rtol=0, atol=0)


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
