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
is not used. A CPU 0-dim tensor the call reads (a scalar, which CUDA takes
beside device tensors: ``index_fill``'s value) reaches it on the call's
device, since the operators it calls may not take one (``index_copy``'s
source); a wrapped number (a Python scalar) stays on the CPU. On the host runtime every overload has a kernel, so none runs.

A decomposition runs its Python once per key: its first run is recorded at
the dispatcher (``recording.py``), and later calls of the same arguments and
state replay those operator calls from C++
(``csrc/ops/aten/decomposition_replay.h``).
"""

from __future__ import annotations

import sys
import threading
import types
import warnings
from typing import Any, Callable, Iterator

import torch

from . import arithmetic, distances, indexing, linalg, nn, provider, recording, sampling, segments

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
    kernel; the values ``start + i * step`` from a cumulative sum of ones:
    for a floating ``out`` in float64 (CPU computes float32 in double; exact
    below 2^53), for an integer one in int64 as CPU's kernel computes it,
    then cast to ``out``'s dtype. A step of 1 or a start of 0 costs no
    call (a replayed arange is as many calls as it has parts)."""
    n = torch.ops.aten.arange.start_out(start, end, step, out=torch.empty(0, dtype=out.dtype, device="meta")).numel()
    if out.dtype.is_floating_point:
        if abs(start) + n * abs(step) >= _MAX_EXACT:
            raise NotImplementedError(
                "aten::arange.start_out: the decomposition on infini computes in float64, which does not represent "
                "every value of this range exactly; use the host runtime (TORCH_INFINI_PROVIDER=host)")
        values = torch.ones(n, dtype=torch.float64, device=out.device).cumsum(0) - 1
        values = values * float(step) if float(step) != 1.0 else values
        values = values + float(start) if float(start) != 0.0 else values
    else:
        start, step = int(start), int(step)  # as CPU's kernel reads them for an integer out
        values = torch.ones(n, dtype=torch.int64, device=out.device).cumsum(0)  # i + 1
        values = values * step if step != 1 else values
        values = values + (start - step) if start != step else values
    values = values.to(out.dtype)
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


def _every_overloads(name: str, every: bool) -> dict[str, Callable[..., Any]]:
    """``all`` or ``any``: its functional overloads and their ``out=`` ones."""
    fn = arithmetic.every_or_any(every)
    functional = {f"aten::{name}{overload}": fn for overload in ("", ".dim", ".dims")}
    return functional | {f"aten::{name}{overload}": _with_out(fn) for overload in (".out", ".dims_out", ".all_out")}


# Ours: where PyTorch has no decomposition of an overload InfiniOps lacks,
# where PyTorch's comes back to the overload itself (through a primitive
# implemented by it), where it does not compute what CPU's kernel does, or
# where it makes several times the calls it needs (var_mean, native_layer_norm and
# its backward, all/any, native_dropout_backward).
_OWN: dict[str, Callable[..., Any]] = {
    "aten::arange.start_out": _arange_out,
    "aten::flip": _flip,
    "aten::flip.out": _with_out(_flip),
    "aten::roll": _roll,
    "aten::roll.out": _with_out(_roll),
    "aten::nonzero": indexing.nonzero,
    "aten::nonzero.out": _with_out(indexing.nonzero),
    "aten::index.Tensor": indexing.index,
    "aten::index.Tensor_out": _with_out(indexing.index),
    "aten::masked_select": indexing.masked_select,
    "aten::masked_select.out": _with_out(indexing.masked_select),
    "aten::bitwise_not": arithmetic.bitwise_not,
    "aten::bitwise_not.out": _with_out(arithmetic.bitwise_not),
    "aten::signbit": arithmetic.signbit,
    "aten::signbit.out": _with_out(arithmetic.signbit),
    "aten::isposinf": arithmetic.is_inf(1.0),
    "aten::isposinf.out": _with_out(arithmetic.is_inf(1.0)),
    "aten::isneginf": arithmetic.is_inf(-1.0),
    "aten::isneginf.out": _with_out(arithmetic.is_inf(-1.0)),
    "aten::polygamma": arithmetic.polygamma,
    "aten::polygamma.out": _with_out(arithmetic.polygamma),
    "aten::median": arithmetic.median_of_all(False),
    "aten::nanmedian": arithmetic.median_of_all(True),
    "aten::convolution": nn.convolution,
    "aten::convolution.out": _with_out(nn.convolution),
    "aten::convolution_backward": nn.convolution_backward,
    "aten::_unique2": indexing.unique2,
    "aten::unique_consecutive": indexing.unique_consecutive,
    "aten::embedding_dense_backward": indexing.embedding_dense_backward,
    "aten::_adaptive_avg_pool2d_backward": nn.adaptive_avg_pool2d_backward,
    "aten::put": indexing.put,
    "aten::put.out": _with_out(indexing.put),
    "aten::pow.Scalar": arithmetic.pow_of_a_number,
    "aten::pow.Scalar_out": _with_out(arithmetic.pow_of_a_number),
    "aten::masked_scatter": indexing.masked_scatter,
    "aten::masked_scatter.out": _with_out(indexing.masked_scatter),
    "aten::equal": indexing.equal,
    "aten::index_put": indexing.index_put,
    "aten::index_put.out": _with_out(indexing.index_put),
    "aten::_index_put_impl": indexing.index_put_impl,
    "aten::_index_put_impl.out": _with_out(indexing.index_put_impl),
    "aten::add.Tensor": arithmetic.add,
    "aten::add.out": _with_out(arithmetic.add),
    "aten::sub.Tensor": arithmetic.sub,
    "aten::sub.out": _with_out(arithmetic.sub),
    "aten::rsub.Tensor": arithmetic.rsub,
    "aten::div.Tensor": arithmetic.div,
    "aten::div.out": _with_out(arithmetic.div),
    "aten::var_mean.correction": arithmetic.var_mean,
    "aten::native_layer_norm": nn.native_layer_norm,
    "aten::native_layer_norm_backward": nn.native_layer_norm_backward,
    "aten::native_dropout_backward": nn.native_dropout_backward,
    "aten::native_dropout_backward.out": _with_out(nn.native_dropout_backward),
    **_every_overloads("all", True),
    **_every_overloads("any", False),
    "aten::hash_tensor": arithmetic.hash_tensor,
    "aten::hash_tensor.out": _with_out(arithmetic.hash_tensor),
    "aten::_cdist_forward": distances.cdist_forward,
    "aten::_cdist_forward.out": _with_out(distances.cdist_forward),
    "aten::_cdist_backward": distances.cdist_backward,
    "aten::_pdist_backward": distances.pdist_backward,
    "aten::_pdist_forward": distances.pdist_forward,
    "aten::_pdist_forward.out": _with_out(distances.pdist_forward),
    "aten::segment_reduce": segments.segment_reduce,
    "aten::segment_reduce.out": _with_out(segments.segment_reduce),
    "aten::_segment_reduce_backward": segments.segment_reduce_backward,
    "aten::_embedding_bag": segments.embedding_bag,
    "aten::_embedding_bag_forward_only": segments.embedding_bag,
    "aten::_embedding_bag_backward": segments.embedding_bag_backward,
    "aten::_embedding_bag_dense_backward": segments.embedding_bag_dense_backward,
    "aten::_embedding_bag_per_sample_weights_backward": segments.embedding_bag_per_sample_weights_backward,
    "aten::grid_sampler_3d": sampling.grid_sampler_3d,
    "aten::grid_sampler_3d.out": _with_out(sampling.grid_sampler_3d),
    "aten::_adaptive_avg_pool3d": nn.adaptive_avg_pool3d,
    "aten::_adaptive_avg_pool3d_backward": nn.adaptive_avg_pool3d_backward,
    "aten::linalg_matrix_exp": linalg.matrix_exp,
    "aten::linalg_matrix_exp.out": _with_out(linalg.matrix_exp),
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


class _Declined:
    """What :func:`run` returns where the overload's decomposition declines
    these arguments (returns ``NotImplemented`` for them, as
    ``adaptive_max_pool2d``'s does for an output size that does not divide
    the input's): unlike an overload without one, other arguments of the
    same overload are still decomposed."""

    def __repr__(self) -> str:
        return "DECLINED"


DECLINED = _Declined()


def run(name: str, args: tuple, kwargs: dict, record: bool = False) -> Any:
    """Runs the decomposition of overload ``name`` (``"aten::trace"``) on its
    arguments; ``NotImplemented`` where PyTorch has none, :data:`DECLINED`
    where it has one that declines these arguments. Raises
    ``NotImplementedError`` where an operator it calls is not served, or its
    result is not on the arguments' device. With ``record``, returns
    ``(result, calls, why they may not be replayed)``
    (:func:`recording.run_recorded`), for the kernel's replay."""
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
    if record:
        result, calls, why_not = recording.run_recorded(lambda: fn(*args, **kwargs))
    else:
        result = fn(*args, **kwargs)
    if result is NotImplemented:
        return DECLINED
    given = {t.device for t in _tensors((args, tuple(kwargs.values())))}
    made = {t.device for t in _tensors(result)}
    stray = {d for d in made if d.type != "infini"} - given
    if stray:
        raise NotImplementedError(
            f"{name}: PyTorch's decomposition returned a tensor on {sorted(map(str, stray))}, not on infini")
    return (result, calls, why_not) if record else result


def install() -> None:
    """Installs :func:`run` as the provider's decomposition runner
    (``torch_infini._C``)."""
    from .. import _C

    _C._set_decomposition_runner(run, DECLINED)


class _Module(types.ModuleType):
    """This module, making the kernel forget what its decompositions' runs
    taught (their recorded calls, ``recording.py``, and the refusals they
    met) when its table is replaced: those came from the code replaced."""

    def __setattr__(self, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name in ("_table", "_in_place_table"):
            from .. import _C

            _C._forget_decomposition_runs()


sys.modules[__name__].__class__ = _Module
