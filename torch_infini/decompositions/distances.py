"""Distance decompositions for the Infini stack: ``_cdist_forward`` and
``_pdist_forward``, which InfiniOps lacks and PyTorch does not decompose.

CPU's kernels (``Dist`` in ATen's ``DistanceOpsKernel.cpp``) reduce the
coordinates' differences of each pair of rows with one map and one
reduction per ``p``; these compute the same map and reduction over all
pairs at once, so they differ from CPU only in the order of the sums
(within the dtype's tolerance). Shapes, dtypes and CPU's argument errors
come from the meta functions, which run first. The registry is
``torch_infini/decompositions/__init__.py``.
"""

from __future__ import annotations

import math

import torch


def _p_norms(diff: torch.Tensor, p: float) -> torch.Tensor:
    """The p-norms of ``diff``'s last dimension, as CPU's ``Dist`` maps and
    reduces them: p = 0 counts the nonzero differences (NaN propagating, as
    CPU's ``min(ceil(|d|), 1)``), p = 1 sums, p = 2 sums squares then takes
    the root, p = inf takes the largest; others sum ``|d|^p`` and take the
    ``1/p``-th power. An empty last dimension gives zeros, as on CPU."""
    if diff.shape[-1] == 0:
        return torch.zeros(diff.shape[:-1], dtype=diff.dtype, device=diff.device)
    if p == 0:
        return diff.abs().ceil().clamp_max(1).sum(-1)
    if p == 1:
        return diff.abs().sum(-1)
    if p == 2:
        return (diff * diff).sum(-1).sqrt()
    if math.isinf(p):
        return diff.abs().amax(-1)
    return diff.abs().pow(p).sum(-1).pow(1.0 / p)


def cdist_forward(x1: torch.Tensor, x2: torch.Tensor, p: float, compute_mode: int | None) -> torch.Tensor:
    """``_cdist_forward``: as ATen's ``cdist_impl`` chooses, the Euclidean
    distance through matrix products (``_euclidean_dist``) for p = 2 where
    ``compute_mode`` asks for it or a side has more than 25 rows, otherwise
    every pair's p-norm of differences."""
    *batch1, r1, c = x1.shape
    *batch2, r2, _ = x2.shape
    batch = list(torch.broadcast_shapes(tuple(batch1), tuple(batch2)))
    if r1 == 0 or r2 == 0 or math.prod(batch) == 0:
        return torch.empty(*batch, r1, r2, dtype=x1.dtype, device=x1.device)
    a = x1.expand(*batch, r1, c)
    b = x2.expand(*batch, r2, c)
    mode = 0 if compute_mode is None else compute_mode
    if p == 2 and (mode == 1 or (mode == 0 and (r1 > 25 or r2 > 25))) and c:
        flat = torch.ops.aten._euclidean_dist.default(a.reshape(-1, r1, c), b.reshape(-1, r2, c))
        return flat.reshape(*batch, r1, r2)
    return _p_norms(a.unsqueeze(-2) - b.unsqueeze(-3), p)


def pdist_forward(x: torch.Tensor, p: float = 2.0) -> torch.Tensor:
    """``_pdist_forward``: the p-norm of the differences of every pair of rows
    ``i < j``, in row-major order of the pairs, as CPU's kernel writes them.
    The pairs' indices depend only on the shape."""
    n = x.shape[0]
    if n < 2:
        return torch.empty(0, dtype=x.dtype, device=x.device)
    i, j = torch.triu_indices(n, n, 1).to(x.device)
    return _p_norms(x.index_select(0, i) - x.index_select(0, j), p)


def _p_norm_gradients(diff: torch.Tensor, grad: torch.Tensor, dist: torch.Tensor, p: float) -> torch.Tensor:
    """Each coordinate difference's share of its pair's gradient, as CPU's
    ``Dist`` backward computes it: zero where the distance is zero (and for
    p = 0), the sign for p = 1, the largest differences' signs for p = inf,
    ``diff |diff|^(p-2) grad / dist^(p-1)`` otherwise (zero differences
    give zero below p = 1)."""
    g, d = grad.unsqueeze(-1), dist.unsqueeze(-1)
    if p == 0:
        return torch.zeros_like(diff)
    if p == 1:
        share = torch.sign(diff) * g
    elif math.isinf(p):
        share = torch.sign(diff) * (diff.abs() == d) * g
    elif p == 2:
        share = diff * g / d
    elif p < 2:
        share = torch.sign(diff) * diff.abs().pow(p - 1) * g / d.pow(p - 1)
        if p < 1:
            share = torch.where(diff == 0, 0.0, share)
    else:
        share = diff * diff.abs().pow(p - 2) * g / d.pow(p - 1)
    return torch.where(d == 0, 0.0, share)


def cdist_backward(grad: torch.Tensor, x1: torch.Tensor, x2: torch.Tensor, p: float,
                   cdist: torch.Tensor) -> torch.Tensor:
    """``_cdist_backward``: the gradient of ``x1`` (autograd calls it with
    the arguments swapped for ``x2``'s), each row's shares summed over the
    other side's rows; of the broadcast batch's shape, as CPU's (autograd
    sums it to ``x1``'s)."""
    r1, c = x1.shape[-2:]
    a = x1.expand(*cdist.shape[:-2], r1, c)
    if r1 == 0 or x2.shape[-2] == 0 or c == 0:
        return torch.zeros_like(a, memory_format=torch.contiguous_format)
    b = x2.expand(*cdist.shape[:-2], x2.shape[-2], c)
    return _p_norm_gradients(a.unsqueeze(-2) - b.unsqueeze(-3), grad, cdist, p).sum(-2)


def pdist_backward(grad: torch.Tensor, x: torch.Tensor, p: float, pdist: torch.Tensor) -> torch.Tensor:
    """``_pdist_backward``: each pair's shares added to its first row and
    taken from its second."""
    n = x.shape[0]
    if n < 2 or x.shape[1] == 0:
        return torch.zeros_like(x)
    i, j = torch.triu_indices(n, n, 1).to(x.device)
    shares = _p_norm_gradients(x.index_select(0, i) - x.index_select(0, j), grad, pdist, p)
    return torch.zeros_like(x).index_add(0, i, shares).index_add(0, j, -shares)
