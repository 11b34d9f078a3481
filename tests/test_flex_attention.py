"""torch.nn.attention.flex_attention on infini, eager and compiled: results
equal to the CPU's (torch_infini/_flex_attention.py says how it gets past
PyTorch's device check). The CPU serves flex_attention for inference only;
infini's eager path also trains, checked against the same attention written
with plain operators."""

from __future__ import annotations

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import torch_infini

B, H, S, D = 1, 2, 32, 16


def _causal(b, h, q_idx, kv_idx):
    return q_idx >= kv_idx


def _relative_bias(score, b, h, q_idx, kv_idx):
    return score + (q_idx - kv_idx) * 0.1


def _inputs(device, requires_grad=False):
    g = torch.Generator().manual_seed(0)
    return [torch.randn(B, H, S, D, generator=g).to(device).requires_grad_(requires_grad) for _ in range(3)]


def _reference(q, k, v):
    """The same attention with plain operators (score_mod, causal mask, softmax)."""
    scores = q @ k.transpose(-2, -1) / D ** 0.5
    idx = torch.arange(S, device=q.device)
    scores = scores + (idx[:, None] - idx[None, :]) * 0.1
    scores = scores.masked_fill(idx[:, None] < idx[None, :], float("-inf"))
    return torch.softmax(scores, dim=-1) @ v


def test_eager_equals_cpu(device):
    mask = create_block_mask(_causal, 1, 1, S, S, device="infini")
    cpu_mask = create_block_mask(_causal, 1, 1, S, S, device="cpu")
    got = flex_attention(*_inputs(device), score_mod=_relative_bias, block_mask=mask)
    want = flex_attention(*_inputs("cpu"), score_mod=_relative_bias, block_mask=cpu_mask)
    assert got.device.type == "infini"
    torch.testing.assert_close(got.cpu(), want)


def test_eager_trains(device):
    """The CPU has no flex_attention backward; infini's matches the plain-operator attention's."""
    q, k, v = _inputs(device, requires_grad=True)
    mask = create_block_mask(_causal, 1, 1, S, S, device="infini")
    flex_attention(q, k, v, score_mod=_relative_bias, block_mask=mask).square().sum().backward()
    rq, rk, rv = _inputs("cpu", requires_grad=True)
    _reference(rq, rk, rv).square().sum().backward()
    for got, want in ((q, rq), (k, rk), (v, rv)):
        torch.testing.assert_close(got.grad.cpu(), want.grad)


def test_eager_under_autocast(device):
    q, k, v = _inputs(device)
    with torch.autocast("infini", dtype=torch.bfloat16):
        out = flex_attention(q, k, v, score_mod=_relative_bias)
    assert out.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = flex_attention(*_inputs("cpu"), score_mod=_relative_bias)
    torch.testing.assert_close(out.cpu(), want)


def test_compiled_equals_cpu_compiled(device):
    if not torch_infini._compile.host_addressable():
        pytest.skip("Inductor generates code for infini only where the host can address its memory")
    torch._dynamo.reset()
    compiled = torch.compile(flex_attention)
    mask = create_block_mask(_causal, 1, 1, S, S, device="infini")
    cpu_mask = create_block_mask(_causal, 1, 1, S, S, device="cpu")
    with torch.no_grad():
        got = compiled(*_inputs(device), score_mod=_relative_bias, block_mask=mask)
        want = compiled(*_inputs("cpu"), score_mod=_relative_bias, block_mask=cpu_mask)
    assert got.device.type == "infini"
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(got.cpu(), _reference(*_inputs("cpu")))


def test_other_devices_keep_pytorchs_check():
    q, k, v = (torch.empty(B, H, S, D, device="meta") for _ in range(3))
    with pytest.raises(ValueError, match="FlexAttention is only supported on .* Found input tensors on meta device"):
        flex_attention(q, k, v)
