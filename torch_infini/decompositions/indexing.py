"""Indexing decompositions for the Infini stack: masks, data-dependent shapes, scatters.

What PyTorch does not decompose, or decomposes back into itself, and
InfiniOps lacks: ``nonzero`` and ``x[mask]`` (whose results' shapes depend
on the values), ``masked_select``/``masked_scatter``, ``unique``,
``index_put`` and ``put``, ``embedding``'s backward, ``equal``. Each is
computed from operators the stack serves (cumulative sums, ``scatter``,
``gather``, ``index_select``/``index_copy``/``index_add``, ``where``),
bit-equal to CPU; the registry is ``torch_infini/decompositions/__init__.py``.
"""

from __future__ import annotations

import torch


def nonzero(x: torch.Tensor) -> torch.Tensor:
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


def index(x: torch.Tensor, indices: list) -> torch.Tensor:
    """``index.Tensor`` with a mask among its indices (``x[mask]``), whose
    result's shape no meta function can lay out before it runs, and which
    PyTorch does not decompose. As ATen's kernel expands it, each bool (or
    deprecated uint8) mask becomes the long indices of its true elements
    (:func:`nonzero`), one per dimension it covers; a mask of another shape
    than the dimensions it covers raises CPU's error."""
    expanded: list = []
    dim = 0
    for entry in indices:
        if entry is not None and entry.dtype in (torch.bool, torch.uint8):
            for j in range(entry.dim()):
                if dim + j >= x.dim() or entry.shape[j] != x.shape[dim + j]:
                    raise IndexError(
                        f"The shape of the mask {list(entry.shape)} at index {j} does not match the shape of the "
                        f"indexed tensor {list(x.shape)} at index {dim + j}")
            expanded.extend(nonzero(entry).unbind(1))
            dim += entry.dim()
        else:
            expanded.append(entry)
            dim += 1
    return torch.ops.aten.index.Tensor(x, expanded)


def masked_select(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``masked_select``: ``x[mask]``, both broadcast to one shape, as CPU's
    kernel computes it."""
    shape = torch.broadcast_shapes(x.shape, mask.shape)
    return index(x.expand(shape), [mask.expand(shape)])


def runs(values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For a 1-D tensor, where each run of equal elements starts (a mask,
    NaNs each their own run, as ``!=`` has them) and each element's run,
    numbered from 0 (a cumulative sum that leaves the first start out)."""
    starts = values[1:] != values[:-1]
    first = torch.ones(min(values.numel(), 1), dtype=torch.bool, device=values.device)
    numbers = torch.cat([torch.zeros_like(first), starts]).cumsum(0)
    return torch.cat([first, starts]), numbers


def unique_of_runs(x: torch.Tensor, values: torch.Tensor, order: torch.Tensor | None, return_inverse: bool,
                    return_counts: bool) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_unique2``'s and ``unique_consecutive``'s three results from the
    flattened ``values`` (sorted by ``order`` for ``_unique2``): each run's
    first element; each element's run number, put back in place through
    ``order`` (``scatter``); each run's length (``scatter_add`` of ones).
    Unrequested results are empty, as CPU's."""
    starts, numbers = runs(values)
    unique = index(values, [starts])
    empty = torch.empty(0, dtype=torch.long, device=x.device)
    inverse = counts = empty
    if return_inverse:
        inverse = numbers if order is None else torch.empty_like(numbers).scatter_(0, order, numbers)
        inverse = inverse.view(x.shape)
    if return_counts:
        counts = torch.zeros(unique.numel(), dtype=torch.long, device=x.device).scatter_add_(
            0, numbers, torch.ones_like(numbers))
    return unique, inverse, counts


def unique2(x: torch.Tensor, sorted: bool = True, return_inverse: bool = False,
            return_counts: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``_unique2`` (``torch.unique`` without ``dim``), which PyTorch does
    not decompose: CPU sorts whatever ``sorted`` says, so this sorts
    (stably) and keeps each run's first element."""
    values, order = torch.sort(x.reshape(-1), stable=True)
    return unique_of_runs(x, values, order, return_inverse, return_counts)


def unique_consecutive(x: torch.Tensor, return_inverse: bool = False, return_counts: bool = False,
                       dim: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``unique_consecutive`` of the flattened tensor (``dim=None``)."""
    if dim is not None:
        raise NotImplementedError("aten::unique_consecutive: decomposed here for dim=None only; use the host "
                                  "runtime (TORCH_INFINI_PROVIDER=host)")
    return unique_of_runs(x, x.reshape(-1), None, return_inverse, return_counts)


def embedding_dense_backward(grad_output: torch.Tensor, indices: torch.Tensor, num_weights: int,
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
    shape = (num_weights,) + grad_output.shape[indices.dim():]
    if grad_output.dtype in (torch.float32, torch.float64):
        # Whole rows added in order, as CPU's kernel adds them: the same sums.
        return torch.index_add(weight, 0, flat, rows).view(shape)
    # Each element's position in the flat weight, added into it in order by
    # index_add along one dimension (CPU's rounding in bfloat16, where
    # index_add over rows accumulates otherwise); index_put would find the
    # positions through an arange over every weight element.
    width = rows.shape[1]
    positions = (flat.long().unsqueeze(1) * width + torch.arange(width, device=flat.device)).reshape(-1)
    return torch.index_add(weight.reshape(-1), 0, positions, rows.reshape(-1)).view(shape)


def put(x: torch.Tensor, index: torch.Tensor, source: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
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


def masked_scatter(x: torch.Tensor, mask: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
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
    picks = torch.where(mask.reshape(-1), rank, torch.zeros((), dtype=rank.dtype, device=rank.device))
    values = torch.cat([flat[:1], flat]).gather(0, picks)
    return torch.where(mask, values.view(x.shape), x)


def equal(x: torch.Tensor, other: torch.Tensor) -> bool:
    """``equal`` (a bool to the host, as CPU's): the same shape and every
    element equal, as ``eq`` compares them (NaN unequal)."""
    return x.shape == other.shape and bool(torch.eq(x, other).all())


def index_put(x: torch.Tensor, indices: list, values: torch.Tensor, accumulate: bool = False) -> torch.Tensor:
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
    write = torch.index_add if accumulate else torch.index_copy
    return write(flat, 0, positions.reshape(-1), values).view(x.shape)


def index_put_impl(x: torch.Tensor, indices: list, values: torch.Tensor, accumulate: bool = False,
                   unsafe: bool = False) -> torch.Tensor:
    """``_index_put_impl``, which ``index_put_`` (``x[i] = v``) calls in
    place: ``index_put`` (``unsafe`` only skips checks CPU makes anyway)."""
    return index_put(x, indices, values, accumulate)
