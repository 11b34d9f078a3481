"""``grid_sampler_3d`` for the Infini stack, which InfiniOps lacks and
PyTorch does not decompose (it has ``grid_sampler_2d``'s only).

As CPU's kernel (``grid_sampler_3d_cpu_impl`` in ATen's ``GridSampler.cpp``)
computes it, per output point: the grid's coordinates unnormalized to the
input's, moved inside by the padding mode (border clips, reflection
reflects then clips), then trilinear (the eight corners' values weighted
by the opposite boxes' volumes, added in CPU's order, corners out of
bounds left out) or nearest (rounding half to even) sampling. Gathers are
``index`` calls, so the arithmetic is elementwise in the input's dtype, as
CPU's; bfloat16 and float16 are refused by the registry, as CPU rounds its
coordinates otherwise there. The registry is ``torch_infini/decompositions/__init__.py``.
"""

from __future__ import annotations

import torch

_BILINEAR, _NEAREST = 0, 1
_ZEROS, _BORDER, _REFLECTION = 0, 1, 2


def _unnormalize(coordinate: torch.Tensor, size: int, align_corners: bool) -> torch.Tensor:
    if align_corners:
        return (coordinate + 1) / 2 * (size - 1)
    return ((coordinate + 1) * size - 1) / 2


def _reflect(coordinate: torch.Tensor, twice_low: int, twice_high: int) -> torch.Tensor:
    """CPU's ``reflect_coordinates``: folded into ``[low, high]``."""
    if twice_low == twice_high:
        return torch.zeros_like(coordinate)
    low = twice_low / 2
    span = (twice_high - twice_low) / 2
    coordinate = (coordinate - low).abs()
    extra = torch.fmod(coordinate, span)
    flips = torch.floor(coordinate / span)
    return torch.where(torch.remainder(flips, 2) == 0, extra + low, span - extra + low)


def _source_index(coordinate: torch.Tensor, size: int, padding_mode: int, align_corners: bool) -> torch.Tensor:
    """CPU's ``grid_sampler_compute_source_index``."""
    coordinate = _unnormalize(coordinate, size, align_corners)
    if padding_mode == _BORDER:
        return coordinate.clamp(0, size - 1)
    if padding_mode == _REFLECTION:
        if align_corners:
            coordinate = _reflect(coordinate, 0, 2 * (size - 1))
        else:
            coordinate = _reflect(coordinate, -1, 2 * size - 1)
        return coordinate.clamp(0, size - 1)
    return coordinate


def grid_sampler_3d(x: torch.Tensor, grid: torch.Tensor, interpolation_mode: int, padding_mode: int,
                    align_corners: bool) -> torch.Tensor:
    """``grid_sampler_3d``: ``x`` ``(N, C, D, H, W)`` sampled at ``grid``
    ``(N, D', H', W', 3)`` (x, y, z), giving ``(N, C, D', H', W')``."""
    if interpolation_mode not in (_BILINEAR, _NEAREST):
        raise NotImplementedError(f"aten::grid_sampler_3d: interpolation mode {interpolation_mode} "
                                  "(CPU refuses bicubic for 3-D input)")
    n, c, depth, height, width = x.shape
    ix = _source_index(grid[..., 0], width, padding_mode, align_corners)
    iy = _source_index(grid[..., 1], height, padding_mode, align_corners)
    iz = _source_index(grid[..., 2], depth, padding_mode, align_corners)
    batch = torch.arange(n, device=x.device).view(n, 1, 1, 1)
    # Gathered as (N, D', H', W', C), then moved to (N, C, D', H', W').
    channels_last = x.permute(0, 2, 3, 4, 1)

    def value_at(z: torch.Tensor, y: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """The input at integral corners, zeros where out of bounds."""
        inside = (z >= 0) & (z < depth) & (y >= 0) & (y < height) & (w >= 0) & (w < width)
        z, y, w = (torch.where(inside, t, 0).to(torch.int64) for t in (z, y, w))
        gathered = channels_last[batch, z, y, w]
        return torch.where(inside.unsqueeze(-1), gathered, 0.0)

    if interpolation_mode == _NEAREST:
        out = value_at(iz.round(), iy.round(), ix.round())
        return out.permute(0, 4, 1, 2, 3).contiguous()

    w0, y0, z0 = ix.floor(), iy.floor(), iz.floor()
    w1, y1, z1 = w0 + 1, y0 + 1, z0 + 1
    # CPU's corner order (top/bottom, north/south, west/east) and weights:
    # each the volume of the box between the point and the opposite corner.
    corners = (
        (z0, y0, w0, (w1 - ix) * (y1 - iy) * (z1 - iz)),
        (z0, y0, w1, (ix - w0) * (y1 - iy) * (z1 - iz)),
        (z0, y1, w0, (w1 - ix) * (iy - y0) * (z1 - iz)),
        (z0, y1, w1, (ix - w0) * (iy - y0) * (z1 - iz)),
        (z1, y0, w0, (w1 - ix) * (y1 - iy) * (iz - z0)),
        (z1, y0, w1, (ix - w0) * (y1 - iy) * (iz - z0)),
        (z1, y1, w0, (w1 - ix) * (iy - y0) * (iz - z0)),
        (z1, y1, w1, (ix - w0) * (iy - y0) * (iz - z0)),
    )
    out = torch.zeros((*ix.shape, c), dtype=x.dtype, device=x.device)  # CPU adds to 0, from the first corner
    for z, y, w, weight in corners:
        out = out + value_at(z, y, w) * weight.unsqueeze(-1)
    return out.permute(0, 4, 1, 2, 3).contiguous()
