"""Segmented reductions for the Infini stack: ``segment_reduce`` and
``_embedding_bag``, which InfiniOps lacks and PyTorch does not decompose.

Both number each element with its segment (bag), then reduce with the
scatter operators, whose ATen kernels add (multiply, compare) each slot's
elements one after the other in index order, as CPU's segment and bag
kernels do: sums, products, maxima and minima are CPU's bit for bit where
CPU's kernel is sequential too (``segment_reduce``; ``_embedding_bag``
outside its vectorized fast path). The auxiliary results of
``_embedding_bag`` (each index's bag, the bags' sizes, the maxima's
indices), which its backward reads, are CPU's exactly. Shapes and CPU's
argument errors come from the meta functions, which run first; the errors
CPU raises from the values (negative lengths) are raised here too, after
reading them back, as CPU reads them. The registry is
``torch_infini/decompositions/__init__.py``.
"""

from __future__ import annotations

from typing import Any

import torch

from .._guard import major_minor

_NEGATIVE_SEGMENT = ("Expected segment_length >= 0 to be true, but got false.  (Could this error message be improved?"
                     "  If so, please report an enhancement request to PyTorch.)")


def _segment_of_each(ends: torch.Tensor, length: int) -> torch.Tensor:
    """For positions ``0 .. length-1`` along the last dimension, the number
    of the segment holding each, given the segments' ends (``(*, S)``,
    cumulative); ``S`` past the last end."""
    positions = torch.arange(length, device=ends.device)
    return (positions.unsqueeze(-1) >= ends.unsqueeze(-2)).sum(-1)


def segment_reduce(data: torch.Tensor, reduce: str, *, lengths: torch.Tensor | None = None,
                   indices: torch.Tensor | None = None, offsets: torch.Tensor | None = None, axis: int = 0,
                   unsafe: bool = False, initial: Any = None) -> torch.Tensor:
    """``segment_reduce``: each segment's elements along ``axis`` reduced
    from ``initial`` (else 0, 1, -inf or inf) in order, NaN propagating for
    ``max``/``min``; ``mean`` divides by the length (in the data's dtype,
    as CPU's kernel does), NaN for an empty segment without ``initial``."""
    axis = axis % data.dim()
    if lengths is None:
        lengths = _lengths_of(lengths, offsets)
    elif not unsafe:
        if lengths.numel() and int(lengths.min()) < 0:
            raise RuntimeError("lengths contains negative value!")
        if not bool((lengths.sum(-1) == data.shape[axis]).all()):
            raise RuntimeError("segment_reduce(): Expected all rows of lengths along axis to sum to "
                               "data.size(lengths.dim()-1) when !unsafe.")
    if lengths.numel() and int(lengths.min()) < 0:
        raise RuntimeError(_NEGATIVE_SEGMENT)
    outer, count = list(lengths.shape[:-1]), lengths.shape[-1]
    inner = list(data.shape[axis + 1:])
    ends = lengths.cumsum(-1)
    segment = _segment_of_each(ends, data.shape[axis])  # (*outer, L)
    segment = segment.view(*outer, data.shape[axis], *[1] * len(inner)).expand(data.shape)
    start = {"max": float("-inf"), "min": float("inf"), "prod": 1.0}.get(reduce, 0.0)
    if initial is not None:
        start = initial
    if reduce not in ("sum", "mean", "max", "min", "prod"):
        raise RuntimeError(f"unsupported reduction given! {reduce}")
    if reduce in ("sum", "mean", "prod") and data.dtype in (torch.bfloat16, torch.float16):
        result = _in_order_rounding_each_step(data, reduce, lengths, axis, start)
    else:
        # One slot past the last segment takes the elements after the last
        # end, which CPU's kernel never reads.
        slots = torch.full([*outer, count + 1, *inner], start, dtype=data.dtype, device=data.device)
        if reduce in ("sum", "mean"):
            result = slots.scatter_add(axis, segment, data)
        else:
            result = slots.scatter_reduce(axis, segment, data, {"max": "amax", "min": "amin"}.get(reduce, reduce))
        result = result.narrow(axis, 0, count)
    if reduce == "mean":
        size = lengths.view(*outer, count, *[1] * len(inner))
        divided = torch.where((size > 0) & ~result.isnan(), result / size.to(data.dtype), result)
        result = divided if initial is not None else torch.where(size == 0, float("nan"), divided)
    return result.contiguous()


def _lengths_of(lengths: torch.Tensor | None, offsets: torch.Tensor | None) -> torch.Tensor:
    if lengths is not None:
        return lengths
    if offsets is None:
        raise RuntimeError("segment_reduce(): Either lengths or offsets must be defined")
    return offsets.narrow(-1, 1, offsets.shape[-1] - 1) - offsets.narrow(-1, 0, offsets.shape[-1] - 1)


def segment_reduce_backward(grad: torch.Tensor, output: torch.Tensor, data: torch.Tensor, reduce: str, *,
                            lengths: torch.Tensor | None = None, offsets: torch.Tensor | None = None,
                            axis: int = 0, initial: Any = None) -> torch.Tensor:
    """``_segment_reduce_backward``, as CPU's kernel computes it: a sum's
    gradient to every element of the segment, a mean's divided by the
    length; a maximum's (minimum's) to every element equal to it or NaN,
    divided by their count where there are several and the gradient is
    positive (CPU divides only those); a product's as ``grad * output /
    value``, or, for a zero or NaN value, ``grad`` times the product of the
    segment's other values from ``initial``, in order. Elements past the
    last segment get none."""
    axis = axis % data.dim()
    lengths = _lengths_of(lengths, offsets)
    outer, count, inner = list(lengths.shape[:-1]), lengths.shape[-1], list(data.shape[axis + 1:])
    size = data.shape[axis]
    ends = lengths.cumsum(-1)
    segment = _segment_of_each(ends, size).view(*outer, size, *[1] * len(inner)).expand(data.shape)

    def per_element(values: torch.Tensor) -> torch.Tensor:
        """``values`` of each segment (``(*outer, count, *inner)``) at its
        elements; zeros past the last segment."""
        padded = torch.cat([values, torch.zeros_like(values.narrow(axis, 0, 1))], axis)
        return padded.gather(axis, segment)

    shape = [*outer, count, *[1] * len(inner)]
    length = per_element(lengths.view(shape).expand(*outer, count, *inner).to(grad.dtype))
    inside = segment < count
    g = per_element(grad.contiguous())
    if reduce == "sum":
        return g
    if reduce == "mean":
        return torch.where(inside, g / torch.where(inside, length, 1), 0.0)
    value = data.to(grad.dtype)
    result = per_element(output.contiguous().to(grad.dtype))
    if reduce in ("max", "min"):
        hit = inside & (value.isnan() | (value == result))
        share = torch.where(hit, g, 0.0)
        slots = torch.zeros([*outer, count + 1, *inner], dtype=grad.dtype, device=grad.device)
        hits = slots.scatter_add(axis, segment, hit.to(grad.dtype)).narrow(axis, 0, count)
        counter = per_element(hits)
        return torch.where(hit & (counter >= 2) & (share > 0), share / counter, share)
    if reduce != "prod":
        raise RuntimeError(f"unsupported reduction given! {reduce}")
    share = torch.where(inside, (g * result) / value, 0.0)
    special = inside & (value.isnan() | (value == 0))
    if bool(special.any()):
        start = per_element((ends - lengths).view(shape).expand(*outer, count, *inner))
        own = torch.arange(size, device=data.device).view(size, *[1] * len(inner)) - start
        others = torch.full_like(value, 1.0 if initial is None else initial)
        for k in range(int(lengths.max())):
            position = (start + k).clamp(0, size - 1).to(torch.int64)
            others = torch.where((k < length) & (own != k), others * value.gather(axis, position), others)
        share = torch.where(special, g * others, share)
    return share


def _in_order_rounding_each_step(data: torch.Tensor, reduce: str, lengths: torch.Tensor, axis: int,
                                 start: Any) -> torch.Tensor:
    """A bfloat16/float16 sum or product as CPU's segment kernel computes it:
    element after element, rounded to the dtype at each step (the scatter
    kernels accumulate such dtypes in float32, which rounds otherwise). One
    step per position of the longest segment, every segment at once."""
    outer, count, inner = list(lengths.shape[:-1]), lengths.shape[-1], list(data.shape[axis + 1:])
    shape = [*outer, count, *[1] * len(inner)]
    first = (lengths.cumsum(-1) - lengths).view(shape)
    size = lengths.view(shape)
    result = torch.full([*outer, count, *inner], start, dtype=data.dtype, device=data.device)
    last = max(data.shape[axis] - 1, 0)
    for j in range(int(lengths.max()) if lengths.numel() else 0):
        position = (first + j).clamp(0, last).expand(result.shape)
        value = data.gather(axis, position)
        stepped = result * value if reduce == "prod" else result + value
        result = torch.where(size > j, stepped, result)
    return result


_SUM, _MEAN, _MAX = 0, 1, 2

# Up to PyTorch 2.13, CPU's embedding_bag backward divides the g-th run of
# equal indices by the count of the g-th sorted index (not of the run's own
# index) under scale_grad_by_freq; from 2.14 it divides each index by its own
# count. The decomposition computes what the running release's CPU does.
_SCALES_BY_RUN_POSITION = tuple(int(v) for v in major_minor(torch.__version__).split(".")) < (2, 14)


def _bag_of_each(n: int, offsets: torch.Tensor) -> torch.Tensor:
    """The bag of each of ``n`` indices, as CPU's ``make_offset2bag``
    numbers them: the offsets at or before its position, less one."""
    return _segment_of_each(offsets, n) - 1


def _is_fast_path(weight: torch.Tensor, padding_idx: int) -> bool:
    """CPU's ``is_fast_path_index_select`` (floating rows with unit stride,
    no padding index), where a sum leaves each index's bag uncomputed."""
    return weight.dtype in (torch.float32, torch.float16, torch.bfloat16) and weight.stride(1) == 1 and padding_idx < 0


def embedding_bag(weight: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor,
                  scale_grad_by_freq: bool = False, mode: int = 0, sparse: bool = False,
                  per_sample_weights: torch.Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int = -1) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_embedding_bag``: the rows ``weight[indices]`` summed, averaged or
    maximized per bag (rows at ``padding_idx`` left out; an empty bag is
    zeros), with CPU's ``offset2bag``, ``bag_size`` and ``max_indices``."""
    n, features = indices.numel(), weight.shape[1]
    bags = offsets.numel() - (1 if include_last_offset else 0)
    bag = _bag_of_each(n, offsets.narrow(0, 0, bags))
    kept = indices != padding_idx if padding_idx >= 0 else torch.ones(n, dtype=torch.bool, device=indices.device)
    # Counted in float64 (exact below 2^53): InfiniOps' index_add takes its
    # alpha as a double, which ATen refuses for integer tensors.
    bag_size = torch.zeros(bags, dtype=torch.float64, device=offsets.device).index_add(
        0, bag, kept.to(torch.float64)).to(offsets.dtype)
    rows = weight.index_select(0, indices)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(-1)
    empty = bag_size == 0
    if mode == _MAX:
        values = torch.where(kept.unsqueeze(-1), rows, float("-inf"))
        spread = bag.unsqueeze(-1).expand(n, features)
        maxima = torch.full((bags, features), float("-inf"), dtype=weight.dtype, device=weight.device)
        maxima = maxima.scatter_reduce(0, spread, values, "amax")
        # The first row of its bag that holds the maximum, as CPU's strict > keeps.
        position = torch.arange(n, device=indices.device).unsqueeze(-1)
        first = torch.where(kept.unsqueeze(-1) & (values == maxima.index_select(0, bag)), position, n)
        first = torch.full((bags, features), n, dtype=torch.int64, device=weight.device).scatter_reduce(
            0, spread, first, "amin")
        padded = torch.cat([indices.to(offsets.dtype), torch.zeros(1, dtype=offsets.dtype, device=indices.device)])
        max_indices = padded.index_select(0, first.view(-1)).view(bags, features)
        output = torch.where(empty.unsqueeze(-1), 0.0, maxima)
    else:
        rows = torch.where(kept.unsqueeze(-1), rows, 0.0)
        output = torch.zeros(bags, features, dtype=weight.dtype, device=weight.device).index_add(0, bag, rows)
        if mode == _MEAN:
            output = output / bag_size.clamp_min(1).to(weight.dtype).unsqueeze(-1)
            max_indices = bag_size.clone()
        else:
            max_indices = torch.zeros_like(bag_size)
            bag_size = torch.zeros_like(bag_size)
    if mode == _SUM and _is_fast_path(weight, padding_idx):
        offset2bag = torch.empty(0, dtype=offsets.dtype, device=offsets.device)
    else:
        offset2bag = bag.to(offsets.dtype)
    return output, offset2bag, bag_size, max_indices


def embedding_bag_dense_backward(grad: torch.Tensor, indices: torch.Tensor, offset2bag: torch.Tensor,
                                 bag_size: torch.Tensor, maximum_indices: torch.Tensor, num_weights: int,
                                 scale_grad_by_freq: bool, mode: int, per_sample_weights: torch.Tensor | None,
                                 padding_idx: int = -1) -> torch.Tensor:
    """``_embedding_bag_dense_backward``: each index's bag gradient, scaled
    (per-sample weight, the index's frequency, the bag's size for a mean) and
    added into its row in the order CPU's kernel adds them (indices sorted,
    stably); a maximum's gradient into the row that held it. Padding rows
    get none."""
    features = grad.shape[1]
    out = torch.zeros(num_weights, features, dtype=grad.dtype, device=grad.device)
    if mode == _MAX:
        held = maximum_indices.reshape(-1)
        nonempty = (bag_size > 0).unsqueeze(-1).expand_as(maximum_indices).reshape(-1)
        columns = torch.arange(features, device=grad.device).repeat(maximum_indices.shape[0])
        flat = torch.where(nonempty, grad.reshape(-1), 0.0)
        slot = torch.where(nonempty, held.to(torch.int64) * features + columns, 0)
        return out.reshape(-1).index_add(0, slot, flat).view(num_weights, features)
    order = torch.sort(indices, stable=True).indices
    rows = indices.index_select(0, order).to(torch.int64)
    bags = offset2bag.index_select(0, order).to(torch.int64)
    scale = torch.ones(rows.shape[0], dtype=torch.float64, device=grad.device)
    if per_sample_weights is not None:
        scale = scale * per_sample_weights.index_select(0, order).to(torch.float64)
    if scale_grad_by_freq:
        counts = torch.zeros(num_weights, dtype=torch.float64, device=grad.device).index_add(
            0, rows, torch.ones_like(scale))
        if _SCALES_BY_RUN_POSITION:  # see its definition
            new_run = torch.ones_like(rows, dtype=torch.bool)
            if rows.numel() > 1:
                new_run[1:] = rows[1:] != rows[:-1]
            run = new_run.to(torch.int64).cumsum(0) - 1
            scale = scale / counts.index_select(0, rows.index_select(0, run))
        else:
            scale = scale / counts.index_select(0, rows)
    if mode == _MEAN:
        size = bag_size.index_select(0, bags).to(torch.float64)
        scale = torch.where(size != 0, scale / size, scale)
    if padding_idx >= 0:
        scale = torch.where(rows == padding_idx, 0.0, scale)
    # CPU's axpy takes the scale in the gradient's dtype.
    contributions = grad.index_select(0, bags) * scale.to(grad.dtype).unsqueeze(-1)
    return out.index_add(0, rows, contributions)


def embedding_bag_per_sample_weights_backward(grad: torch.Tensor, weight: torch.Tensor, indices: torch.Tensor,
                                              offsets: torch.Tensor, offset2bag: torch.Tensor, mode: int,
                                              padding_idx: int = -1) -> torch.Tensor:
    """``_embedding_bag_per_sample_weights_backward`` (sums only): each
    index's bag gradient dotted with its row; 0 for padding rows."""
    if mode != _SUM:
        raise RuntimeError("embedding_bag_backward: per_sample_weights only supported for mode='sum'")
    if offset2bag.numel() != indices.numel():  # CPU's fast path left it uncomputed
        offset2bag = _bag_of_each(indices.numel(), offsets)
    rows = weight.index_select(0, indices)
    result = (grad.index_select(0, offset2bag.to(torch.int64)) * rows).sum(-1)
    if padding_idx >= 0:
        result = torch.where(indices == padding_idx, 0.0, result)
    return result


def embedding_bag_backward(grad: torch.Tensor, indices: torch.Tensor, offsets: torch.Tensor,
                           offset2bag: torch.Tensor, bag_size: torch.Tensor, maximum_indices: torch.Tensor,
                           num_weights: int, scale_grad_by_freq: bool, mode: int, sparse: bool,
                           per_sample_weights: torch.Tensor | None, padding_idx: int = -1) -> torch.Tensor:
    """``_embedding_bag_backward`` (what autograd calls): each index's bag
    numbered where CPU's fast path left it uncomputed, as ATen's does, then
    the dense gradient. A sparse gradient is a sparse tensor, which the
    device does not hold."""
    if sparse:
        raise NotImplementedError("aten::_embedding_bag_backward: a sparse gradient (sparse=True) is a sparse "
                                  "tensor, which infini does not hold; use sparse=False, or the host runtime "
                                  "(TORCH_INFINI_PROVIDER=host)")
    if indices.numel() and offset2bag.numel() == 0:
        offset2bag = _bag_of_each(indices.numel(), offsets)
    return embedding_bag_dense_backward(grad, indices, offset2bag, bag_size, maximum_indices, num_weights,
                                        scale_grad_by_freq, mode, per_sample_weights, padding_idx)
