"""Fused operators of InfiniOps that have no ATen operator, as
``torch.ops.infini.*`` custom operators usable from model code on every
device (CPU included), with autograd formulas:

- ``torch.ops.infini.swiglu(input, gate)``: ``input * silu(gate)`` (InfiniOps ``Swiglu``);
- ``torch.ops.infini.silu_and_mul(x)``: ``silu(x[..., :d]) * x[..., d:]`` for a last
  dimension of ``2 * d`` (InfiniOps ``SiluAndMul``, vLLM's convention);
- ``torch.ops.infini.causal_softmax(x)``: softmax over the last dimension where row
  ``i`` of ``[..., seq_len, total_len]`` sees its first ``total_len - seq_len + i + 1``
  positions and the rest are 0 (InfiniOps ``CausalSoftmax``, a decoder's masked
  attention scores with a KV cache of ``total_len - seq_len`` positions).

On the Infini stack they run on InfiniOps' own ``Swiglu``, ``SiluAndMul`` (``Swiglu``
over the input's halves where the pin lacks it) and ``CausalSoftmax`` where the pin
compiles them in and serves the call (dtype, shapes: see ``python -m torch_infini
--ops``); everywhere else (CPU, the host runtime, a call InfiniOps does not serve,
torch.compile's tracing) they are composed of ATen operators. The autograd formulas
are the same either way. ``F.rms_norm`` likewise runs on InfiniOps' ``RmsNorm``
(csrc/ops/nn/fused.cpp).
"""

from __future__ import annotations

import torch
from torch import Tensor

from . import _C

_LIB = torch.library.Library("infini", "DEF")  # noqa: TOR901  (kept alive with the module)
_LIB.define("swiglu(Tensor input, Tensor gate) -> Tensor")
_LIB.define("silu_and_mul(Tensor x) -> Tensor")
_LIB.define("causal_softmax(Tensor x) -> Tensor")


def _swiglu(input: Tensor, gate: Tensor) -> Tensor:
    return input * torch.nn.functional.silu(gate)


def _silu_and_mul(x: Tensor) -> Tensor:
    gate, up = x.chunk(2, dim=-1)
    return torch.nn.functional.silu(gate) * up


def _causal_mask(x: Tensor) -> Tensor:
    seq, total = x.shape[-2], x.shape[-1]
    rows = torch.arange(seq, device=x.device).unsqueeze(-1)
    cols = torch.arange(total, device=x.device)
    return cols <= rows + (total - seq)  # True where a position is seen


def _causal_softmax(x: Tensor) -> Tensor:
    masked = x.masked_fill(~_causal_mask(x), float("-inf"))
    return torch.softmax(masked, dim=-1)


def _on_device(name: str, composed):
    """The infini kernel of ``torch.ops.infini.<name>``: the provider's fused
    kernel where it serves the call, else the composition."""

    def kernel(*args: Tensor) -> Tensor:
        out = _C._fused_kernel(name, list(args))
        return composed(*args) if out is None else out

    kernel.__name__ = f"_{name}_infini"
    return kernel


for _name, _fn in (("swiglu", _swiglu), ("silu_and_mul", _silu_and_mul), ("causal_softmax", _causal_softmax)):
    _LIB.impl(_name, _fn, "CompositeExplicitAutograd")
    _LIB.impl(_name, _on_device(_name, _fn), "PrivateUse1")


def _silu_grad(g: Tensor) -> Tensor:
    s = torch.sigmoid(g)
    return s * (1 + g * (1 - s))


def _swiglu_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _swiglu_backward(ctx, grad):
    input, gate = ctx.saved_tensors
    return grad * torch.nn.functional.silu(gate), grad * input * _silu_grad(gate)


def _silu_and_mul_setup(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _silu_and_mul_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    gate, up = x.chunk(2, dim=-1)
    return torch.cat([grad * up * _silu_grad(gate), grad * torch.nn.functional.silu(gate)], dim=-1)


def _causal_softmax_setup(ctx, inputs, output):
    ctx.save_for_backward(output)


def _causal_softmax_backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return y * (grad - (grad * y).sum(dim=-1, keepdim=True))


torch.library.register_autograd("infini::swiglu", _swiglu_backward, setup_context=_swiglu_setup)
torch.library.register_autograd("infini::silu_and_mul", _silu_and_mul_backward, setup_context=_silu_and_mul_setup)
torch.library.register_autograd("infini::causal_softmax", _causal_softmax_backward,
                                setup_context=_causal_softmax_setup)


def swiglu(input: Tensor, gate: Tensor) -> Tensor:
    """``input * silu(gate)``, InfiniOps' ``Swiglu``."""
    return torch.ops.infini.swiglu(input, gate)


def silu_and_mul(x: Tensor) -> Tensor:
    """``silu(x[..., :d]) * x[..., d:]`` for ``x.shape[-1] == 2 * d``, InfiniOps' ``SiluAndMul``."""
    return torch.ops.infini.silu_and_mul(x)


def causal_softmax(x: Tensor) -> Tensor:
    """Softmax of ``x`` (``[..., seq_len, total_len]``) over its last dimension
    under a causal mask aligned to the end, InfiniOps' ``CausalSoftmax``."""
    return torch.ops.infini.causal_softmax(x)
