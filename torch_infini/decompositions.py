"""PyTorch's own decompositions, for the operators the Infini provider does not map onto InfiniOps.

InfiniOps offers the operators generated from ATen's ``.out`` schemas and a
few hand-written ones; ATen has more (``native_layer_norm``, ``arange``,
``flip``, ``trace``, the ``*_backward`` formulas, ...). PyTorch decomposes
most of them into others for its compilers (``torch._decomp``). On a
provider that does not run CPU kernels, an overload it does not map runs as
its decomposition, where every operator that calls is served (natively or
ATen-backed); only otherwise is it refused, or run through the opt-in CPU
fallback. The decomposition runs on the device like any other code: nothing
is copied through the host.

Only non-random overloads that are functional, write only ``out=``
arguments, or write only ``self`` in place decompose (the kernel in
``csrc/ops/aten/aten_decompose.cpp`` decides): a decomposition that fails
part-way has then written nothing (an ``out=`` argument is written last; an
in-place overload runs as its functional one, then copies into ``self``),
and a random one would not draw what CPU's kernel draws. A decomposition that returns a tensor off the call's device
is not used. On the host runtime every overload has a kernel, so none runs.
"""

from __future__ import annotations

import math
import threading
import warnings
from typing import Any, Callable, Iterator

import torch

from . import _decomp_convolution

_lock = threading.Lock()
_table: dict[str, Callable[..., Any]] | None = None
# In-place overloads as their functional ones (see _in_place), by name;
# None where an overload has no functional twin.
_in_place_table: dict[str, Callable[..., Any] | None] = {}


def _overload_name(op: torch._ops.OpOverload) -> str:
    schema = op._schema
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def _writes_only_outs(op: torch._ops.OpOverload) -> bool:
    """Functional, or writing only keyword-only ``out=`` arguments (which
    PyTorch's decompositions write last, after computing the result)."""
    return all(a.kwarg_only for a in op._schema.arguments if a.alias_info is not None and a.alias_info.is_write)


_MAX_EXACT = 2.0**53


def _arange_out(start: Any, end: Any, step: Any = 1, *, out: torch.Tensor) -> torch.Tensor:
    """``arange.start_out`` (which ``torch.arange`` calls): PyTorch's
    decomposition ends in ``prims.iota``, whose implementation is
    ``torch.arange`` itself. The length and CPU's errors come from the meta
    kernel; the indices from a cumulative sum of ones (exact below 2^53);
    the values are ``start + i * step`` in float64 (CPU computes float32 in
    double), cast to ``out``'s dtype."""
    n = torch.ops.aten.arange.start_out(start, end, step, out=torch.empty(0, dtype=out.dtype, device="meta")).numel()
    if not out.dtype.is_floating_point:
        start, step = int(start), int(step)  # as CPU's kernel reads them for an integer out
    if abs(start) + n * abs(step) >= _MAX_EXACT:
        raise NotImplementedError(
            "aten::arange.start_out: the decomposition on infini computes in float64, which does not represent "
            "every value of this range exactly; use the host runtime (TORCH_INFINI_PROVIDER=host)")
    index = torch.ones(n, dtype=torch.float64, device=out.device).cumsum(0) - 1
    values = (index * float(step) + float(start)).to(out.dtype)
    if out.numel() not in (0, n):  # CPU's warning (its meta function words it otherwise)
        warnings.warn(
            f"The number of elements in the out tensor of shape {list(out.shape)} is {out.numel()} which does not "
            f"match the computed number of elements {n}. Note that this may occur as a result of rounding error. "
            f"The out tensor will be resized to a tensor of shape ({n},).", UserWarning, stacklevel=2)
    out.resize_(n)
    return out.copy_(values)


def _flip(x: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """``flip``: PyTorch's decomposition ends in ``prims.rev``, whose
    implementation is ``flip`` itself. Each dimension is reversed by
    ``index_select`` with descending indices (data movement only: exact).
    CPU's errors come from the meta kernel, which runs first."""
    out = x
    for d in {dim % max(x.dim(), 1) for dim in dims}:
        n = x.shape[d] if x.dim() else 1
        if n > 1:
            out = out.index_select(d, torch.arange(n - 1, -1, -1, device=x.device))
    return out.clone() if out is x else out


def _roll(x: torch.Tensor, shifts: list[int], dims: list[int] = ()) -> torch.Tensor:
    """``roll``: PyTorch's decomposition flips (``prims.rev``, as ``flip``).
    Each shift is a ``cat`` of the two slices of its dimension, in swapped
    order; no dimensions rolls the flattened tensor, as CPU does."""
    if not dims:
        return _roll(x.flatten(), shifts, [0]).view(x.shape)
    out = x
    for shift, d in zip(shifts, dims):
        n = out.shape[d]
        s = shift % n if n else 0
        if s:
            out = torch.cat([out.narrow(d, n - s, s), out.narrow(d, 0, n - s)], d)
    return out.clone() if out is x else out


def _nonzero(x: torch.Tensor) -> torch.Tensor:
    """``nonzero``, which PyTorch does not decompose (its result's shape
    depends on the values). The count is read back to the host, the
    synchronization CPU's and CUDA's ``nonzero`` make too. Each nonzero
    element's rank among them (a cumulative sum) is where ``scatter`` writes
    its coordinates, each dimension's index grid in turn; the other elements
    all go to a spare slot 0, which is dropped. Indices and counts only:
    exact."""
    flat = (x != 0).reshape(-1)
    n = int(flat.sum())
    if n == 0 or x.dim() == 0:  # no coordinates; strides as CPU's
        return torch.empty_strided((n, x.dim()), (1, n), dtype=torch.long, device=x.device)
    slot = torch.where(flat, flat.cumsum(0), torch.zeros((), dtype=torch.long, device=x.device))
    columns = []
    for d, size in enumerate(x.shape):
        shape = [1] * x.dim()
        shape[d] = size
        grid = torch.arange(size, device=x.device).view(shape).expand(x.shape).reshape(-1)
        columns.append(torch.zeros(n + 1, dtype=torch.long, device=x.device).scatter_(0, slot, grid)[1:])
    return torch.stack(columns).t()  # column-major, as CPU's nonzero lays it out


def _index(x: torch.Tensor, indices: list) -> torch.Tensor:
    """``index.Tensor`` with a mask among its indices (``x[mask]``), whose
    result's shape no meta function can lay out before it runs, and which
    PyTorch does not decompose. As ATen's kernel expands it, each bool (or
    deprecated uint8) mask becomes the long indices of its true elements
    (:func:`_nonzero`), one per dimension it covers; a mask of another shape
    than the dimensions it covers raises CPU's error."""
    expanded: list = []
    dim = 0
    for index in indices:
        if index is not None and index.dtype in (torch.bool, torch.uint8):
            for j in range(index.dim()):
                if dim + j >= x.dim() or index.shape[j] != x.shape[dim + j]:
                    raise IndexError(
                        f"The shape of the mask {list(index.shape)} at index {j} does not match the shape of the "
                        f"indexed tensor {list(x.shape)} at index {dim + j}")
            expanded.extend(_nonzero(index).unbind(1))
            dim += index.dim()
        else:
            expanded.append(index)
            dim += 1
    return torch.ops.aten.index.Tensor(x, expanded)


def _masked_select(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``masked_select``: ``x[mask]``, both broadcast to one shape, as CPU's
    kernel computes it."""
    shape = torch.broadcast_shapes(x.shape, mask.shape)
    return _index(x.expand(shape), [mask.expand(shape)])


def _runs(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For a 1-D tensor, where each run of equal elements starts (a mask,
    NaNs each their own run, as ``!=`` has them) and each element's run,
    numbered from 0 (a cumulative sum that leaves the first start out)."""
    starts = values[1:] != values[:-1]
    first = torch.ones(min(values.numel(), 1), dtype=torch.bool, device=values.device)
    numbers = torch.cat([torch.zeros_like(first), starts]).cumsum(0)
    return torch.cat([first, starts]), numbers


def _unique_of_runs(x: torch.Tensor, values: torch.Tensor, order: torch.Tensor | None, return_inverse: bool,
                    return_counts: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_unique2``'s and ``unique_consecutive``'s three results from the
    flattened ``values`` (sorted by ``order`` for ``_unique2``): each run's
    first element; each element's run number, put back in place through
    ``order`` (``scatter``); each run's length (``scatter_add`` of ones).
    Unrequested results are empty, as CPU's."""
    starts, numbers = _runs(values)
    unique = _index(values, [starts])
    empty = torch.empty(0, dtype=torch.long, device=x.device)
    inverse = counts = empty
    if return_inverse:
        inverse = numbers if order is None else torch.empty_like(numbers).scatter_(0, order, numbers)
        inverse = inverse.view(x.shape)
    if return_counts:
        counts = torch.zeros(unique.numel(), dtype=torch.long, device=x.device).scatter_add_(
            0, numbers, torch.ones_like(numbers))
    return unique, inverse, counts


def _unique2(x: torch.Tensor, sorted: bool = True, return_inverse: bool = False,
             return_counts: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_unique2`` (``torch.unique`` without ``dim``), which PyTorch does
    not decompose: CPU sorts whatever ``sorted`` says, so this sorts
    (stably) and keeps each run's first element."""
    values, order = torch.sort(x.reshape(-1), stable=True)
    return _unique_of_runs(x, values, order, return_inverse, return_counts)


def _unique_consecutive(x: torch.Tensor, return_inverse: bool = False, return_counts: bool = False,
                        dim: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``unique_consecutive`` of the flattened tensor (``dim=None``)."""
    if dim is not None:
        raise NotImplementedError("aten::unique_consecutive: decomposed here for dim=None only; use the host "
                                  "runtime (TORCH_INFINI_PROVIDER=host)")
    return _unique_of_runs(x, x.reshape(-1), None, return_inverse, return_counts)


def _embedding_dense_backward(grad_output: torch.Tensor, indices: torch.Tensor, num_weights: int,
                              padding_idx: int, scale_grad_by_freq: bool) -> torch.Tensor:
    """``embedding_dense_backward`` as CPU's kernel computes it: each
    index's gradient row added into its weight row in order, in the
    gradient's dtype (PyTorch's decomposition adds bfloat16 and float16 in
    float32, a few bfloat16 ulps from CPU's sums), the padding index's rows
    left out. Scaling by frequency runs as PyTorch's decomposition in
    float32 and float64, and is refused in reduced precision."""
    if scale_grad_by_freq:
        if grad_output.dtype in (torch.bfloat16, torch.float16):
            raise NotImplementedError(
                "aten::embedding_dense_backward: scale_grad_by_freq in bfloat16 and float16 is not computed as "
                "CPU's kernel does on the Infini stack; use the host runtime (TORCH_INFINI_PROVIDER=host)")
        from torch._decomp import decomposition_table as theirs

        return theirs[torch.ops.aten.embedding_dense_backward.default](
            grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)
    rows = grad_output.reshape(indices.numel(), -1)
    flat = indices.reshape(-1)
    if padding_idx >= 0:
        rows = rows.masked_fill((flat == padding_idx).unsqueeze(1), 0)
    weight = torch.zeros((num_weights, rows.shape[1]), dtype=grad_output.dtype, device=grad_output.device)
    return torch.index_put(weight, (flat,), rows, accumulate=True).view(
        (num_weights,) + grad_output.shape[indices.dim():])


def _window_weights(n_in: int, n_out: int, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """Adaptive pooling's windows along one dimension, as a matrix: row i
    holds 1 / (its length) over output i's window [floor(i n_in / n_out),
    ceil((i + 1) n_in / n_out)). Made from the sizes alone, on the host."""
    i = torch.arange(n_out)
    start = (i * n_in) // n_out
    end = ((i + 1) * n_in + n_out - 1) // n_out
    position = torch.arange(n_in)
    inside = (position[None, :] >= start[:, None]) & (position[None, :] < end[:, None])
    return (inside.double() / (end - start)[:, None].double()).to(dtype=dtype, device=device)


def _adaptive_avg_pool2d_backward(grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``_adaptive_avg_pool2d_backward``, which PyTorch does not decompose:
    each output's gradient spread evenly over its window, which is
    separable, so ``A_h^T @ grad @ A_w`` with the windows' weight matrices
    (not in bfloat16 and float16: see _NOT_CPUS_IN_REDUCED_PRECISION)."""
    (h, w), (oh, ow) = x.shape[-2:], grad_output.shape[-2:]
    rows = _window_weights(h, oh, grad_output.dtype, grad_output.device)
    columns = _window_weights(w, ow, grad_output.dtype, grad_output.device)
    return torch.matmul(torch.matmul(rows.t(), grad_output), columns)


def _put(x: torch.Tensor, index: torch.Tensor, source: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
    """``put`` (``put_`` runs as it, then writes ``self``): ``index_put`` into
    the flattened tensor, which wraps negative indices as ``put`` does; an
    index out of range raises CPU's error first (its range read back to the
    host)."""
    n = x.numel()
    flat = index.reshape(-1)
    if flat.numel():
        for bound in (int(flat.min()), int(flat.max())):
            if not -n <= bound < n:
                raise IndexError(f"out of range: tried to access index {bound} on a tensor of {n} elements.")
    return torch.index_put(x.reshape(-1), (flat,), source.reshape(-1), accumulate).view(x.shape)


def _pow_of_a_number(base: Any, exponent: torch.Tensor) -> torch.Tensor:
    """``pow.Scalar`` (a number to a tensor's powers), which InfiniOps lacks:
    ATen computes it as ``pow.Tensor_Tensor`` of the number as a 0-dim
    tensor of the result's dtype (its wrapped number, cast as the kernel
    casts it)."""
    return torch.pow(torch.tensor(base, dtype=torch.result_type(base, exponent)), exponent)


def _masked_scatter(x: torch.Tensor, mask: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
    """``masked_scatter``, which PyTorch does not decompose: the k-th true
    element of the mask (broadcast to ``x``, in row-major order) takes
    ``source``'s k-th element. A cumulative sum of the mask numbers the true
    elements from 1; ``gather`` picks them from ``source`` behind one spare
    element (so no subtraction), and ``where`` keeps ``x`` elsewhere."""
    mask = mask.expand(x.shape)
    rank = mask.reshape(-1).cumsum(0)
    if x.numel() and int(rank[-1]) > source.numel():
        raise RuntimeError("Number of elements of source < number of ones in mask")
    flat = source.reshape(-1)
    index = torch.where(mask.reshape(-1), rank, torch.zeros((), dtype=rank.dtype, device=rank.device))
    values = torch.cat([flat[:1], flat]).gather(0, index)
    return torch.where(mask, values.view(x.shape), x)


def _equal(x: torch.Tensor, other: torch.Tensor) -> bool:
    """``equal`` (a bool to the host, as CPU's): the same shape and every
    element equal, as ``eq`` compares them (NaN unequal)."""
    return x.shape == other.shape and bool(torch.eq(x, other).all())


def _index_put(x: torch.Tensor, indices: list, values: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
    """``index_put`` (``x[indices] = values`` out of place): PyTorch's
    decomposition runs ``index_put_`` on a copy, which comes back here. The
    positions written are ``index`` of an arange over ``x``'s elements
    (``index`` settles masks, broadcasting, negative indices and CPU's bounds
    errors); ``values``, broadcast to them, are written there by
    ``index_copy``, or added by ``index_add``, into a flat copy of ``x``.
    CPU's other errors (dtypes, shapes) come from the meta kernel first."""
    positions = torch.ops.aten.index.Tensor(torch.arange(x.numel(), device=x.device).view(x.shape), indices)
    flat = x.reshape(-1)
    values = values.expand(positions.shape).reshape(-1)
    put = torch.index_add if accumulate else torch.index_copy
    return put(flat, 0, positions.reshape(-1), values).view(x.shape)


def _index_put_impl(x: torch.Tensor, indices: list, values: torch.Tensor, accumulate: bool = False,
                    unsafe: bool = False) -> torch.Tensor:
    """``_index_put_impl``, which ``index_put_`` (``x[i] = v``) calls in
    place: ``index_put`` (``unsafe`` only skips checks CPU makes anyway)."""
    return _index_put(x, indices, values, accumulate)


def _sub(x: torch.Tensor | float, other: torch.Tensor | float, *, alpha: Any = 1) -> torch.Tensor:
    """``sub``: ATen's own ``sub`` kernel is ``add``'s with ``alpha``
    negated, so this is CPU's arithmetic exactly (PyTorch's decomposition
    ends in ``prims.sub``, which is ``sub``). CPU's refusals (bool operands)
    come from the meta kernel first. A number (``1 - x``) is a 0-dim tensor
    of the result's dtype, which CPU casts it to."""
    if not isinstance(x, torch.Tensor):
        x = torch.tensor(x, dtype=torch.result_type(x, other))
    return torch.add(x, other, alpha=-alpha)


def _rsub(x: torch.Tensor, other: torch.Tensor, *, alpha: Any = 1) -> torch.Tensor:
    """``rsub.Tensor``: ``other - alpha * x``, which ATen computes as ``sub``."""
    return _sub(other, x, alpha=alpha)


def _div(x: torch.Tensor | float, other: torch.Tensor | float) -> torch.Tensor:
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


#: Operators whose ``Scalar`` overloads ATen computes as their ``Tensor``
#: twins with the Scalar as a 0-dim tensor (a wrapped number): for an integer
#: ``self`` and an integer Scalar, one of ``self``'s dtype, which is what the
#: wrapped number becomes. InfiniOps takes a Scalar as a double, which ATen
#: reads as a floating one (and refuses, or promotes by), so the stack refuses
#: these calls (csrc/runtime/infini/infini_binding.cpp) and they run as the
#: twin, whose 0-dim operand reaches the device exactly. Not ``pow`` or
#: ``remainder``, whose twins differ in their errors (a negative power, a zero
#: divisor).
_SCALAR_TWINS = ("eq", "ne", "lt", "le", "gt", "ge", "add", "mul", "bitwise_and", "bitwise_or", "bitwise_xor",
                 "masked_fill")


def _integer_scalar_as_tensor(op: torch._ops.OpOverload, theirs: Callable[..., Any] | None) -> Callable[..., Any] | None:
    """``op`` (a ``Scalar`` overload of ``_SCALAR_TWINS``) run as its
    ``Tensor`` twin for an integer ``self`` and integer Scalars that its dtype
    represents; otherwise as ``theirs`` (PyTorch's decomposition). None
    where ``op`` has no twin of the same arguments."""
    name = op._schema.overload_name
    packet = getattr(torch.ops.aten, op._schema.name.split("::")[1])
    twin_name = name.replace("Scalar", "Tensor")
    if twin_name not in packet.overloads():
        return None
    twin = getattr(packet, twin_name)
    ours, twins = op._schema.arguments, twin._schema.arguments
    if len(ours) != len(twins) or any(a.name != b.name for a, b in zip(ours, twins)):
        return None
    as_tensor = [i for i, (a, b) in enumerate(zip(ours, twins))
                 if a.type.kind() == "NumberType" and b.type.kind() == "TensorType"]
    if not as_tensor or any(str(a.type) != str(b.type) for i, (a, b) in enumerate(zip(ours, twins))
                            if i not in as_tensor):
        return None

    comparison = packet.__name__.split(".")[-1] in ("eq", "ne", "lt", "le", "gt", "ge")

    def run(self: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        values = list(args)
        integer = not (self.dtype.is_floating_point or self.dtype.is_complex or self.dtype == torch.bool)
        scalars = [values[i - 1] for i in as_tensor if i - 1 < len(values)]
        if len(scalars) == len(as_tensor) and all(type(v) in (int, bool) and -(2**63) <= v < 2**63 for v in scalars):
            if integer:
                for i in as_tensor:
                    # Cast as ATen casts the wrapped number (wrapping, as C++ does).
                    values[i - 1] = torch.tensor(int(values[i - 1]), dtype=torch.int64).to(self.dtype)
                return twin(self, *values, **kwargs)
            if self.dtype == torch.bool and comparison:
                # A bool's 0 or 1 against the number, in float64: equal to 0
                # or 1 exactly, ordered as the integer is (any() is sum != False).
                for i in as_tensor:
                    values[i - 1] = torch.tensor(float(values[i - 1]), dtype=torch.float64, device=self.device)
                return twin(self, *values, **kwargs)
        if theirs is None:
            raise NotImplementedError(
                f"{_overload_name(op)}: served here for an integer tensor and an int64 Scalar only (as "
                f"{_overload_name(twin)}); use the host runtime (TORCH_INFINI_PROVIDER=host)")
        return theirs(self, *args, **kwargs)

    return run


def _bitwise_not(x: torch.Tensor) -> torch.Tensor:
    """``bitwise_not`` of a bool tensor (the stack cannot pass a bool operand
    to InfiniOps' kernel, whose ~ of a byte would not be a bool): its
    ``logical_not``. Other dtypes reach InfiniOps' kernel and never come here."""
    if x.dtype != torch.bool:
        raise NotImplementedError(f"aten::bitwise_not: decomposed here for bool tensors only, not {x.dtype}")
    return torch.logical_not(x)


#: Floating dtypes as the signed integers of their width (their sign bit).
_BITS = {torch.float64: torch.int64, torch.float32: torch.int32, torch.float16: torch.int16,
         torch.bfloat16: torch.int16}


def _signbit(x: torch.Tensor) -> torch.Tensor:
    """``signbit``, whose bool result ATen writes as bool only (the stack
    has no bool DataType to pass it): a floating tensor's bits read as a
    signed integer are negative exactly where the sign bit is set (-0.0 and
    a negative NaN included); an integer is negative; a bool never."""
    if x.dtype in _BITS:
        return x.view(_BITS[x.dtype]) < 0
    if x.dtype == torch.bool:
        return torch.zeros_like(x)
    return x < 0


def _is_inf(sign: float) -> Callable[[torch.Tensor], torch.Tensor]:
    """``isposinf`` / ``isneginf`` (bool results ATen writes as bool only):
    equality with the infinity; an integer or bool tensor holds none."""
    def run(x: torch.Tensor) -> torch.Tensor:
        if x.dtype.is_floating_point:
            return x == sign * float("inf")
        return torch.zeros(x.shape, dtype=torch.bool, device=x.device)
    return run


def _polygamma(n: int, x: torch.Tensor) -> torch.Tensor:
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
        return _trigamma(x)
    factor = _kernel_factorial(n, double=x.dtype == torch.float64)
    return torch.special.zeta(torch.full_like(x, n + 1.0), x) * ((1.0 if n % 2 else -1.0) * factor)


def _trigamma(x: torch.Tensor) -> torch.Tensor:
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


def _kernel_factorial(n: int, double: bool) -> float:
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


def _median_of_all(nan_skipping: bool) -> Callable[[torch.Tensor], torch.Tensor]:
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


def _in_place(name: str) -> Callable[..., Any] | None:
    """In-place overload ``name`` (``"aten::index_put_"``) as its functional
    overload followed by a copy into ``self``: like an ``out=`` argument,
    ``self`` is written last, once the result is whole. The functional
    overload runs as any call does where the device has a kernel for it
    (served, or as its own decomposition); where it is a composite of the
    in-place overload itself (``_index_put_impl`` is a copy, then
    ``_index_put_impl_``), its decomposition runs instead. None where
    ``name`` has no functional overload of the same arguments."""
    qualified, _, overload = name.partition(".")
    namespace, _, base = qualified.partition("::")
    if namespace != "aten" or not base.endswith("_"):
        return None
    try:
        in_place = getattr(getattr(torch.ops.aten, base), overload or "default")
        functional = getattr(getattr(torch.ops.aten, base[:-1]), overload or "default")
    except AttributeError:
        return None
    ours, theirs = in_place._schema, functional._schema
    # An in-place view (t_, squeeze_) changes self's metadata, not its values.
    if (torch.Tag.inplace_view in in_place.tags or len(theirs.returns) != 1
            or len(ours.arguments) != len(theirs.arguments)
            or any(a.name != b.name or str(a.type) != str(b.type) for a, b in zip(ours.arguments, theirs.arguments))):
        return None

    functional_name = theirs.name + (f".{theirs.overload_name}" if theirs.overload_name else "")
    compute: Callable[..., Any] = functional
    if not torch._C._dispatch_has_kernel_for_dispatch_key(functional_name, "PrivateUse1"):
        compute = decomposition_table().get(functional_name, functional)

    def run(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        result = compute(self, *args, **kwargs)
        if result.shape != self.shape or result.dtype != self.dtype:  # CPU's meta kernel has refused such calls
            raise NotImplementedError(f"{name}: its functional overload gives {result.dtype}{list(result.shape)} "
                                      f"for self of {self.dtype}{list(self.shape)}")
        # A result over an argument's memory (set's) is not what the in-place
        # overload does, which makes self share that memory.
        # (An empty result has no memory to share: its address is null, as
        # an empty argument's is.)
        given = {t.untyped_storage().data_ptr() for t in _tensors((self, args, tuple(kwargs.values())))}
        if result.numel() and result.untyped_storage().data_ptr() in given:
            raise NotImplementedError(f"{name}: its functional overload returns a view of an argument")
        return self.copy_(result)

    return run


def _with_out(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The ``out=`` overload of a functional decomposition, as PyTorch makes
    its own (``out`` resized and written last)."""
    from torch._prims_common.wrappers import out_wrapper

    return out_wrapper()(fn)


# Where PyTorch's decomposition of an overload comes back to the overload
# itself (through a primitive implemented by it), ours.
_OWN: dict[str, Callable[..., Any]] = {
    "aten::arange.start_out": _arange_out,
    "aten::flip": _flip,
    "aten::flip.out": _with_out(_flip),
    "aten::roll": _roll,
    "aten::roll.out": _with_out(_roll),
    "aten::nonzero": _nonzero,
    "aten::nonzero.out": _with_out(_nonzero),
    "aten::index.Tensor": _index,
    "aten::index.Tensor_out": _with_out(_index),
    "aten::masked_select": _masked_select,
    "aten::masked_select.out": _with_out(_masked_select),
    "aten::bitwise_not": _bitwise_not,
    "aten::bitwise_not.out": _with_out(_bitwise_not),
    "aten::signbit": _signbit,
    "aten::signbit.out": _with_out(_signbit),
    "aten::isposinf": _is_inf(1.0),
    "aten::isposinf.out": _with_out(_is_inf(1.0)),
    "aten::isneginf": _is_inf(-1.0),
    "aten::isneginf.out": _with_out(_is_inf(-1.0)),
    "aten::polygamma": _polygamma,
    "aten::polygamma.out": _with_out(_polygamma),
    "aten::median": _median_of_all(False),
    "aten::nanmedian": _median_of_all(True),
    "aten::convolution": _decomp_convolution.convolution,
    "aten::convolution.out": _with_out(_decomp_convolution.convolution),
    "aten::convolution_backward": _decomp_convolution.convolution_backward,
    "aten::_unique2": _unique2,
    "aten::unique_consecutive": _unique_consecutive,
    "aten::embedding_dense_backward": _embedding_dense_backward,
    "aten::_adaptive_avg_pool2d_backward": _adaptive_avg_pool2d_backward,
    "aten::put": _put,
    "aten::put.out": _with_out(_put),
    "aten::pow.Scalar": _pow_of_a_number,
    "aten::pow.Scalar_out": _with_out(_pow_of_a_number),
    "aten::masked_scatter": _masked_scatter,
    "aten::masked_scatter.out": _with_out(_masked_scatter),
    "aten::equal": _equal,
    "aten::index_put": _index_put,
    "aten::index_put.out": _with_out(_index_put),
    "aten::_index_put_impl": _index_put_impl,
    "aten::_index_put_impl.out": _with_out(_index_put_impl),
    "aten::sub.Tensor": _sub,
    "aten::sub.out": _with_out(_sub),
    "aten::rsub.Tensor": _rsub,
    "aten::div.Tensor": _div,
    "aten::div.out": _with_out(_div),
}


#: Decompositions whose results in bfloat16 or float16 are not CPU's, as
#: CPU's kernel rounds its intermediate values to the input's dtype where the
#: decomposition does not: grid_sampler's coordinates (nearest sampling
#: picks other pixels, up to 0.18 apart on OpInfo's sample), adaptive
#: average pooling's gradient divided and summed in bfloat16 (ours multiplies
#: by the windows' weights). float32 agrees. Refused for those dtypes rather
#: than differ from CPU.
_NOT_CPUS_IN_REDUCED_PRECISION = frozenset({"aten::grid_sampler_2d", "aten::grid_sampler_3d",
                                            "aten::_adaptive_avg_pool2d_backward"})


def decomposition_table() -> dict[str, Callable[..., Any]]:
    """``{"aten::trace": fn, ...}``: PyTorch's decompositions
    (``torch._decomp.decomposition_table``) of ATen overloads that are
    functional or write only ``out=`` arguments, by qualified overload name,
    and ours where PyTorch's calls the overload itself. Built on first use:
    importing ``torch._decomp`` takes a while, and the host runtime never
    needs it."""
    global _table
    with _lock:
        if _table is None:
            from torch._decomp import decomposition_table as table

            _table = {
                _overload_name(op): fn
                for op, fn in table.items()
                if isinstance(op, torch._ops.OpOverload) and op.namespace == "aten" and _writes_only_outs(op)
            }
            _table.update(_OWN)
            for base in _SCALAR_TWINS:
                packet = getattr(torch.ops.aten, base)
                for overload in packet.overloads():
                    if overload.startswith("Scalar"):
                        op = getattr(packet, overload)
                        fn = _integer_scalar_as_tensor(op, _table.get(_overload_name(op)))
                        if fn is not None:
                            _table[_overload_name(op)] = fn
        return _table


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    """The tensors in ``value``, nested lists and tuples included."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def run(name: str, args: tuple, kwargs: dict) -> Any:
    """Runs the decomposition of overload ``name`` (``"aten::trace"``) on its
    arguments; ``NotImplemented`` where PyTorch has none. Raises
    ``NotImplementedError`` where an operator it calls is not served, or its
    result is not on the arguments' device."""
    fn = decomposition_table().get(name)
    if fn is None:
        if name not in _in_place_table:
            made = _in_place(name)
            with _lock:
                _in_place_table.setdefault(name, made)
        fn = _in_place_table[name]
        if fn is None:
            return NotImplemented
    if name in _NOT_CPUS_IN_REDUCED_PRECISION and any(
            t.dtype in (torch.bfloat16, torch.float16) for t in _tensors((args, tuple(kwargs.values())))):
        raise NotImplementedError(
            f"{name}: its decomposition does not round as CPU's kernel does in bfloat16 and float16; "
            "compute it in float32, or use the host runtime (TORCH_INFINI_PROVIDER=host)")
    result = fn(*args, **kwargs)
    given = {t.device for t in _tensors((args, tuple(kwargs.values())))}
    made = {t.device for t in _tensors(result)}
    stray = {d for d in made if d.type != "infini"} - given
    if stray:
        raise NotImplementedError(
            f"{name}: PyTorch's decomposition returned a tensor on {sorted(map(str, stray))}, not on infini")
    return result


def install() -> None:
    """Installs :func:`run` as the provider's decomposition runner
    (``torch_infini._C``)."""
    from . import _C

    _C._set_decomposition_runner(run)
