"""``torch.nn.attention.flex_attention`` on infini, eager and compiled.

PyTorch checks the device of flex_attention's inputs against a fixed set
(``_validate_device``: cuda, cpu, xpu, hpu, mps) before anything runs, and
Inductor's lowering of the ``flex_attention`` higher-order operator picks a
template by device type (C++ for ``cpu``, Metal for ``mps``, Triton for
everything else). Nothing else in flex_attention depends on the device: its
eager path is the operator's reference implementation (``sdpa_dense``, plain
ATen operators, forward and backward), which infini runs like any other.

So, when PyTorch loads the modules involved (never at ``import torch``):

* ``torch.nn.attention.flex_attention._validate_device`` lets infini tensors
  through and leaves every other device to PyTorch's own check;
* the ``flex_attention`` operator gets an ``AutocastPrivateUse1`` kernel, the
  same as its ``AutocastCUDA`` one (query, key and value cast to the autocast
  dtype), so it runs inside ``torch.autocast("infini")``;
* under ``torch.compile``, Inductor's ``flex_attention`` lowering hands infini
  inputs to its C++ template (the CPU one), which the infini Inductor backend
  compiles as it compiles every other C++ kernel, over device memory the host
  can address. Like CPU's, it serves inference only (no log-sum-exp, no
  backward: training through a compiled flex_attention on infini raises
  PyTorch's own message for CPU); the eager path trains.

What would break it: a PyTorch that renames ``_validate_device`` or checks the
device elsewhere (flex_attention then raises its ``ValueError`` naming the
device again, never runs on another device), or changes the lowering's
signature (compiling then fails with Inductor's error). tests/test_flex_attention.py
catches both.
"""

from __future__ import annotations

import importlib
from typing import Any

import torch

_DEVICE = "infini"
_API_MODULE = "torch.nn.attention.flex_attention"
_HOP_MODULE = "torch._higher_order_ops.flex_attention"
_LOWERING_MODULE = "torch._inductor.kernel.flex.flex_attention"


def _install_device_check() -> None:
    import torch.nn.attention.flex_attention as api

    original = api._validate_device
    if getattr(original, "_infini", False):
        return

    def _validate_device(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor) -> None:
        if query.device.type == _DEVICE:
            return  # infini runs flex_attention's reference implementation, forward and backward
        original(query, key, value)

    _validate_device._infini = True  # type: ignore[attr-defined]
    _validate_device.__doc__ = original.__doc__
    api._validate_device = _validate_device


def _install_autocast() -> None:
    from torch._C import DispatchKey

    # (torch._higher_order_ops exports the operator under the module's name)
    hop = importlib.import_module(_HOP_MODULE)

    operator = hop.flex_attention
    if DispatchKey.AutocastPrivateUse1 in operator.py_kernels:
        return

    def flex_attention_autocast_infini(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, score_mod: Any,
                                       block_mask: tuple, scale: float, kernel_options: dict,
                                       score_mod_other_buffers: tuple = (),
                                       mask_mod_other_buffers: tuple = ()) -> Any:
        dtype = torch.get_autocast_dtype(_DEVICE)
        query, key, value = (hop._autocast_cast(t, _DEVICE, dtype) for t in (query, key, value))
        with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(DispatchKey.AutocastPrivateUse1)):
            return operator(query, key, value, score_mod, block_mask, scale, kernel_options,
                            score_mod_other_buffers, mask_mod_other_buffers)

    operator.py_impl(DispatchKey.AutocastPrivateUse1)(flex_attention_autocast_infini)


def _install_lowering() -> None:
    from torch._inductor.kernel.flex import flex_attention as kernel
    from torch._inductor.kernel.flex.flex_cpu import lower_cpu
    from torch._inductor.lowering import lowerings

    operator = torch.ops.higher_order.flex_attention
    original = lowerings[operator]
    if getattr(original, "_infini", False):
        return

    def flex_attention(query: Any, key: Any, value: Any, subgraph: Any, block_mask: Any, scale: Any,
                       kernel_options: dict, score_mod_other_buffers: Any, mask_mod_other_buffers: Any) -> Any:
        if query.get_device().type == _DEVICE:
            return lower_cpu(query, key, value, subgraph, block_mask, scale, kernel_options,
                             score_mod_other_buffers, mask_mod_other_buffers)
        return original(query, key, value, subgraph, block_mask, scale, kernel_options,
                        score_mod_other_buffers, mask_mod_other_buffers)

    flex_attention._infini = True  # type: ignore[attr-defined]
    lowerings[operator] = flex_attention
    kernel.flex_attention = flex_attention


#: module -> what to install once PyTorch has executed it.
AFTER_IMPORT = {_API_MODULE: _install_device_check, _HOP_MODULE: _install_autocast,
                _LOWERING_MODULE: _install_lowering}
