"""nn.LSTM / nn.GRU on infini: the fused cells PyTorch calls for a PrivateUse1
device (csrc/ops/rnn_cells.cpp), forward and backward against CPU, and on the
host runtime one queued call per cell (not a dozen operators each)."""

from __future__ import annotations

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
@pytest.mark.parametrize("cls,cell", [(torch.nn.LSTM, "lstm"), (torch.nn.GRU, "gru")])
def test_each_cell_is_one_call_on_the_host_runtime(cls, cell):
    _, dev = _pair(cls, input_size=4, hidden_size=4)
    x = torch.randn(3, 2, 4, device=DEV)
    dev(x)[0].sum().backward()  # the first calls of each kind
    torch_infini.fallback.reset_coverage()
    torch_infini.fallback.start_recording()
    try:
        dev(x)[0].sum().backward()
        torch.infini.synchronize()
    finally:
        torch_infini.fallback.stop_recording()
    calls = {row["op"]: row["calls"] for row in torch_infini.fallback.coverage()}
    assert calls.get(f"infini_host::_thnn_fused_{cell}_cell") == 3, calls  # one per time step
    # the cell's pointwise operators are inside those calls, not queued one by one
    assert calls.get("aten::sigmoid") is None and calls.get("aten::tanh") is None, calls
