"""Arithmetic decompositions for the Infini stack, each as CPU's kernel computes it.

``sub``, ``rsub`` and ``div`` (PyTorch's end in primitives implemented by
themselves), a number's powers, ``bitwise_not`` of bools, ``signbit`` and
``isposinf``/``isneginf`` (bool results ATen writes as bool only),
``polygamma``, ``median()`` of all elements, ``hash_tensor``,
``var_mean`` (two calls where PyTorch's makes seven) and ``all``/``any``
(one ``amin``/``amax`` of bools where PyTorch's makes three calls). The registry is
``torch_infini/decompositions/__init__.py``. Dtypes CPU's kernel refuses
(a bool ``pow``) are refused before any decomposition runs, with CPU's
error (``cpu_dtype_refusal`` in ``csrc/ops/aten/aten_cpu_checks.h``).
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch

from . import provider


def _number_as(value: Any, dtype: torch.dtype) -> torch.Tensor:
    """A Python number as a 0-dim tensor of ``dtype``, cast as ATen casts a
    wrapped number: 300 into uint8 wraps to 44, 1e39 into float32 is inf.
    ``torch.tensor(value, dtype=dtype)`` checks the range and raises."""
    return torch.tensor(value).to(dtype)


def pow_of_a_number(base: Any, exponent: torch.Tensor) -> torch.Tensor:
    """``pow.Scalar`` (a number to a tensor's powers), which InfiniOps lacks:
    ATen computes it as ``pow.Tensor_Tensor`` of the number as a 0-dim
    tensor of the result's dtype (its wrapped number, cast as the kernel
    casts it)."""
    return torch.pow(_number_as(base, torch.result_type(base, exponent)), exponent)


def add(x: torch.Tensor | float, other: torch.Tensor | float, *, alpha: Any = 1) -> Any:
    """``add.Tensor``: PyTorch's decomposition, which declines two bool
    tensors (``NotImplemented``: the call is refused as every bool add is,
    naming the operator and the dtype). PyTorch's would multiply ``other``
    by ``alpha`` into int64, which its own ``prims.add`` then rejects beside
    a bool, with a message about neither."""
    if (isinstance(x, torch.Tensor) and isinstance(other, torch.Tensor) and x.dtype == torch.bool
            and other.dtype == torch.bool):
        return NotImplemented
    from torch._decomp import decomposition_table

    return decomposition_table[torch.ops.aten.add.Tensor](x, other, alpha=alpha)


def sub(x: torch.Tensor | float, other: torch.Tensor | float, *, alpha: Any = 1) -> torch.Tensor:
    """``sub``: ATen's own ``sub`` kernel is ``add``'s with ``alpha``
    negated, so this is CPU's arithmetic exactly (PyTorch's decomposition
    ends in ``prims.sub``, which is ``sub``). CPU's refusals (bool operands)
    come from the meta kernel first. A number (``1 - x``) is a 0-dim tensor
    of the result's dtype, which CPU casts it to."""
    _check_sub_operands(x, other)
    if not isinstance(x, torch.Tensor):
        x = _number_as(x, torch.result_type(x, other))
    return torch.add(x, other, alpha=-alpha)


def _is_bool(value: torch.Tensor | float) -> bool:
    return value.dtype == torch.bool if isinstance(value, torch.Tensor) else isinstance(value, bool)


def _check_sub_operands(x: torch.Tensor | float, other: torch.Tensor | float) -> None:
    """CPU's kernel refuses bool operands (ATen's ``sub_check``); sub's meta
    function, which lays out this call's result, does not look."""
    if _is_bool(x) and _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with two bool tensors is not supported. "
                           "Use the `^` or `logical_xor()` operator instead.")
    if _is_bool(x) or _is_bool(other):
        raise RuntimeError("Subtraction, the `-` operator, with a bool tensor is not supported. "
                           "If you are trying to invert a mask, use the `~` or `logical_not()` operator instead.")


def rsub(x: torch.Tensor, other: torch.Tensor, *, alpha: Any = 1) -> torch.Tensor:
    """``rsub.Tensor``: ``other - alpha * x``, which ATen computes as ``sub``."""
    return sub(other, x, alpha=alpha)


def div(x: torch.Tensor | float, other: torch.Tensor | float) -> torch.Tensor:
    """``div.Tensor`` (true division) as ``addcdiv(-0.0, x, other)``, which
    CPU computes as ``-0.0 + (1 * x) / other``: ``1 * x`` is exact, and
    adding -0.0 keeps every value and every zero's sign, so each element is
    CPU's quotient, rounded once, in every floating dtype (PyTorch's
    decomposition ends in ``prims.div``, which is ``div``; InfiniOps 1f6f9c2's
    ATen-backed ``Div``, ``Divide`` and ``TrueDivide`` cannot be made).
    Integer operands divide in the result's floating dtype, as CPU's do. A
    bfloat16 or float16 tensor divided by a scalar (a number, a 0-dim
    tensor) is divided as CPU does it: by the scalar's original value, in
    float32, the quotient rounded once to the tensor's dtype. A number
    divided by a tensor (``1 / x``) is the number in the tensor's dtype."""
    dtype = torch.result_type(x, other)
    if not dtype.is_floating_point:
        dtype = torch.get_default_dtype()
    scalar = not isinstance(other, torch.Tensor) or other.dim() == 0
    computes_in = torch.float32 if scalar and dtype in (torch.bfloat16, torch.float16) else dtype
    x, other = (v.to(computes_in) if isinstance(v, torch.Tensor) else torch.tensor(v, dtype=computes_in)
                for v in (x, other))
    on = x if x.device.type != "cpu" or other.device.type == "cpu" else other
    zero = torch.full(torch.broadcast_shapes(x.shape, other.shape), -0.0, dtype=computes_in, device=on.device)
    return torch.addcdiv(zero, x, other).to(dtype)


def bitwise_not(x: torch.Tensor) -> torch.Tensor:
    """``bitwise_not`` of a bool tensor (the stack cannot pass a bool operand
    to InfiniOps' kernel, whose ~ of a byte would not be a bool): its
    ``logical_not``. Other dtypes reach InfiniOps' kernel and never come here."""
    if x.dtype != torch.bool:
        raise NotImplementedError(f"aten::bitwise_not: decomposed here for bool tensors only, not {x.dtype}")
    return torch.logical_not(x)


#: Floating dtypes as the signed integers of their width (their sign bit).
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}


def signbit(x: torch.Tensor) -> torch.Tensor:
    """``signbit``, whose bool result ATen writes as bool only (the stack
    has no bool DataType to pass it): a floating tensor's bits read as a
    signed integer are negative exactly where the sign bit is set (-0.0 and
    a negative NaN included); an integer is negative; a bool never."""
    if x.dtype in _BITS:
        return x.view(_BITS[x.dtype]) < 0
    if x.dtype == torch.bool:
        return torch.zeros_like(x)
    return x < 0


def is_inf(sign: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """``isposinf`` / ``isneginf`` (bool results ATen writes as bool only):
    equality with the infinity; an integer or bool tensor holds none."""
    def run(x: torch.Tensor) -> torch.Tensor:
        if x.dtype.is_floating_point:
            return x == sign * float("inf")
        return torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    return run


def var_mean(x: torch.Tensor, dim: Any = None, *, correction: Any = None,
             keepdim: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """``var_mean.correction`` as ``var`` and ``mean``, each one operator
    call InfiniOps serves. PyTorch's decomposition computes the mean as a
    ``sum`` over the dimensions, each unsqueezed and expanded, divided by
    their size: seven calls, replayed inside ``native_layer_norm``'s
    decomposition on every layer norm. ATen's ``mean`` is that ``sum``
    divided by the same count, so the values are the same bits."""
    if not (x.dtype.is_floating_point or x.dtype.is_complex):
        raise RuntimeError("var_mean only support floating point and complex dtypes")
    return (torch.var(x, dim, correction=correction, keepdim=keepdim),
            torch.mean(x, dim, keepdim=keepdim))


def polygamma(n: int, x: torch.Tensor) -> torch.Tensor:
    """``polygamma``, which InfiniOps lacks, as CPU's kernel computes it:
    ``digamma`` for n = 0, CPU's trigamma series for n = 1, and for n >= 2
    ``(-1)^(n+1) n! zeta(n+1, x)`` (bit-equal to CPU's)."""
    if n == 0:
        return torch.digamma(x)
    if not x.dtype.is_floating_point:
        x = x.to(torch.get_default_dtype())
    if x.dtype in (torch.bfloat16, torch.float16):
        raise NotImplementedError(
            f"aten::polygamma: CPU's kernel computes its series in {x.dtype}, rounding each step, which this "
            "decomposition (float32 and float64) does not; compute it in float32, or use the host runtime "
            "(TORCH_INFINI_PROVIDER=host)")
    if n == 1:
        return trigamma(x)
    factor = kernel_factorial(n, double=x.dtype == torch.float64)
    return torch.special.zeta(torch.full_like(x, n + 1.0), x) * ((1.0 if n % 2 else -1.0) * factor)


def trigamma(x: torch.Tensor) -> torch.Tensor:
    """CPU's ``trigamma`` (ATen's Math.h), step for step in x's dtype: six
    terms of the recurrence, then the asymptotic series; below 0.5 the
    reflection through ``sin(pi x)``. Bit-equal to CPU's for x >= 0.5; below,
    ATen's vectorized ``sin`` differs from the C library's ``sinf`` that
    CPU's kernel calls, by up to 4e-7 relative in float32 (5e-16 in
    float64)."""
    dtype = x.dtype

    def const(value: float) -> torch.Tensor:  # a C literal of x's type
        return torch.tensor(value, dtype=dtype)

    reflect = x < 0.5
    sin_pi_x = torch.sin(x * const(math.pi))
    head = torch.where(reflect, -((const(math.pi) * const(math.pi)) / (sin_pi_x * sin_pi_x)), 0.0)
    x = torch.where(reflect, 1 - x, x)
    result = head
    for _ in range(6):
        result = result + 1 / (x * x)
        x = x + 1
    ixx = 1 / (x * x)
    result = result + (1 + 1 / (2 * x) + ixx * (const(1 / 6) - ixx * (const(1 / 30) - ixx * const(1 / 42)))) / x
    return torch.where(reflect, -result, result)


def kernel_factorial(n: int, double: bool) -> float:
    """n! as CPU's polygamma kernel computes it, ``std::exp(std::lgamma(n +
    1))``: the C library's functions, in double for float64 and in float
    for float32, a host constant. Not
    Python's ``math.lgamma`` (its own implementation) nor ATen's vectorized
    one, which differ in the last bits."""
    global _libm
    if _libm is None:
        import ctypes
        import ctypes.util

        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        for name, c_type in (("lgamma", ctypes.c_double), ("exp", ctypes.c_double),
                             ("lgammaf", ctypes.c_float), ("expf", ctypes.c_float)):
            getattr(libm, name).restype = c_type
            getattr(libm, name).argtypes = [c_type]
        _libm = libm
    if double:
        return _libm.exp(_libm.lgamma(n + 1.0))
    return _libm.expf(_libm.lgammaf(n + 1.0))  # float32


_libm: Any = None


def median_of_all(nan_skipping: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """``median()`` / ``nanmedian()`` of every element: the flattened
    tensor's median along its one dimension (the lower median, NaN as CPU
    treats it); an empty floating tensor's is NaN, as CPU's."""
    def run(x: torch.Tensor) -> torch.Tensor:
        if x.numel() == 0:
            if not x.dtype.is_floating_point:
                raise NotImplementedError("aten::median of an empty integer tensor (CPU returns an unset value)")
            return torch.full((), float("nan"), dtype=x.dtype, device=x.device)
        flat = x.reshape(-1)
        return (torch.nanmedian(flat, 0) if nan_skipping else torch.median(flat, 0))[0]
    return run


def hash_tensor(x: torch.Tensor, dim: list[int] = (), *, keepdim: bool = False, mode: int = 0) -> torch.Tensor:
    """``hash_tensor`` (mode 0, the only one ATen has: the XOR of every
    element's 64 bits, as uint64), which InfiniOps lacks: a floating
    element's bits are its float64 value's, an integer's (or bool's) its
    int64 value's, as CPU's kernel reads them. XOR is exact in any order, so
    a pairwise tree over the reduced dimensions (``dim=[]``: all) gives
    CPU's bits. Empty reductions give 0, XOR's identity; CPU's errors come
    from the meta function."""
    if mode != 0:
        raise NotImplementedError(f"aten::hash_tensor: mode {mode} is not ATen's mode 0 (XOR)")
    bits = x.to(torch.float64).view(torch.int64) if x.dtype.is_floating_point else x.to(torch.int64)
    # A 0-dim tensor's dimension 0 (or -1) is the tensor itself: nothing to
    # permute or keep.
    dims = sorted({d % x.dim() for d in dim}) if dim and x.dim() > 0 else list(range(x.dim()))
    kept = [d for d in range(x.dim()) if d not in dims]
    flat = bits.permute([*kept, *dims]).reshape(*[x.shape[d] for d in kept], -1)
    while flat.shape[-1] > 1:
        n = flat.shape[-1]
        if n % 2:
            flat = torch.cat([flat, torch.zeros_like(flat.narrow(-1, 0, 1))], -1)
            n += 1
        flat = torch.bitwise_xor(flat.narrow(-1, 0, n // 2), flat.narrow(-1, n // 2, n // 2))
    result = flat.sum(-1) if flat.shape[-1] == 0 else flat.squeeze(-1)
    if keepdim:
        for d in dims:
            result = result.unsqueeze(d)
    return result.view(torch.uint64)


def every_or_any(every: bool) -> Callable[..., torch.Tensor]:
    """``all`` (``every``) or ``any``, each overload: the minimum or maximum of
    the elements as bools (``x != 0``; a bool tensor as it is), one
    ``amin``/``amax`` call where PyTorch's reference makes three (a
    ``logical_not`` each side of ``any``, itself decomposed). ``softmax``
    on a PrivateUse1 device is ``_safe_softmax``, which calls ``all`` on
    every attention's scores. PyTorch's reference where CPU's result is
    not bool (uint8 in, uint8 out), where there are no elements (``amin``
    refuses to reduce none), for ``dim=[]`` (``all`` reduces nothing,
    ``amin`` everything), and where the provider lacks the kernels."""
    name = "all" if every else "any"

    def run(x: torch.Tensor, dim: Any = None, keepdim: bool = False) -> torch.Tensor:
        if (x.dtype == torch.uint8 or x.numel() == 0 or (isinstance(dim, (list, tuple)) and not dim)
                or not provider.serves("aten::amin.out" if every else "aten::amax.out")
                or (x.dtype != torch.bool and not provider.serves("aten::ne.Scalar_out"))):
            import torch._refs as refs

            return getattr(refs, name)(x, dim, keepdim)
        bools = x if x.dtype == torch.bool else x != 0
        reduce = torch.amin if every else torch.amax
        return reduce(bools, () if dim is None else dim, keepdim)

    return run
