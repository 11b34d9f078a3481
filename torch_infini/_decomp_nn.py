"""Convolutions and pooling gradients for the Infini stack.

Convolutions as ``im2col``, matrix products and ``col2im``.

ATen's ``convolution`` and ``convolution_backward`` have no InfiniOps
operator and no decomposition in PyTorch; InfiniOps' ATen-backed ``im2col``,
``col2im`` and ``matmul`` (over its ``Gemm``) compute them as ATen's own slow
convolutions do: the input's patches as columns, one product per group, and
for a transposed convolution (and the input's gradient) the columns summed
back into place by ``col2im``. 1-D convolutions run as 2-D ones of height 1;
3-D ones are refused. bfloat16 and float16 are computed in float32 and
rounded once, as CPU's oneDNN kernels accumulate. CPU's errors come first,
from the meta function; results are laid out as it lays them out
(csrc/ops/aten/aten_decompose.cpp).
"""

from __future__ import annotations

from typing import Sequence

import torch

_REDUCED = (torch.bfloat16, torch.float16)


def _refuse_unless_2d(x: torch.Tensor, what: str) -> None:
    if x.dim() not in (3, 4):
        raise NotImplementedError(
            f"aten::{what}: {x.dim() - 2}-D convolutions are not served on the Infini stack (1-D and 2-D are, as "
            "im2col and matrix products); use the host runtime (TORCH_INFINI_PROVIDER=host)")


def _as_2d(values: Sequence[int], x: torch.Tensor, fill: int) -> list[int]:
    """A parameter as the 2-D convolution's: a 1-D one's (height 1) gets
    ``fill`` for the height; a single value stands for both dimensions."""
    values = list(values)
    if x.dim() == 3:
        return [fill] + values
    return values * 2 if len(values) == 1 else values


def _widened(*tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    return [t.float() if t is not None and t.dtype in _REDUCED else t for t in tensors]


def _columns_to_output(weight: torch.Tensor, columns: torch.Tensor, groups: int) -> torch.Tensor:
    """Per group, ``weight (O/g, K) @ columns (N, K, L)``: (N, O, L)."""
    n, k_all, length = columns.shape
    out_channels = weight.shape[0]
    w = weight.reshape(groups, out_channels // groups, -1)
    cols = columns.view(n, groups, k_all // groups, length)
    return torch.matmul(w, cols).reshape(n, out_channels, length)


def _output_to_columns(weight: torch.Tensor, y: torch.Tensor, groups: int) -> torch.Tensor:
    """Per group, ``weight (C/g, K)^T @ y (N, C/g, L)``: the columns (N, g*K, L)
    col2im sums into place."""
    n, channels, length = y.shape
    w = weight.reshape(groups, channels // groups, -1).transpose(1, 2)
    return torch.matmul(w, y.view(n, groups, channels // groups, length)).reshape(n, -1, length)


def _forward_2d(x, weight, bias, stride, padding, dilation, groups):
    n, _, h, w = x.shape
    kernel = list(weight.shape[2:])
    columns = torch.ops.aten.im2col.default(x, kernel, dilation, padding, stride)
    out_h = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    out = _columns_to_output(weight, columns, groups).view(n, weight.shape[0], out_h, out_w)
    return out if bias is None else out + bias.view(1, -1, 1, 1)


def _transposed_2d(x, weight, bias, stride, padding, dilation, output_padding, groups):
    n, _, h, w = x.shape
    kernel = list(weight.shape[2:])
    size = [(d - 1) * s - 2 * p + dil * (k - 1) + op + 1
            for d, s, p, dil, k, op in zip((h, w), stride, padding, dilation, kernel, output_padding)]
    columns = _output_to_columns(weight, x.reshape(n, x.shape[1], h * w), groups)
    out = torch.ops.aten.col2im.default(columns, size, kernel, dilation, padding, stride)
    return out if bias is None else out + bias.view(1, -1, 1, 1)


def convolution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> torch.Tensor:
    """``aten::convolution`` (every ``conv*d`` and ``conv_transpose*d``
    reaches it), 1-D and 2-D."""
    _refuse_unless_2d(x, "convolution")
    dtype = x.dtype
    one_d = x.dim() == 3
    args = [_as_2d(v, x, fill) for v, fill in ((stride, 1), (padding, 0), (dilation, 1), (output_padding, 0))]
    x, weight, bias = _widened(x, weight, bias)
    if one_d:
        x, weight = x.unsqueeze(2), weight.unsqueeze(2)
    if transposed:
        out = _transposed_2d(x, weight, bias, *args, groups)
    else:
        out = _forward_2d(x, weight, bias, *args[:3], groups)
    return (out.squeeze(2) if one_d else out).to(dtype)


def convolution_backward(grad_output: torch.Tensor, x: torch.Tensor, weight: torch.Tensor,
                         bias_sizes: Sequence[int] | None, stride: Sequence[int], padding: Sequence[int],
                         dilation: Sequence[int], transposed: bool, output_padding: Sequence[int], groups: int,
                         output_mask: Sequence[bool]) -> tuple:
    """``aten::convolution_backward``: the input's gradient is the adjoint
    convolution (``col2im`` of the weight's columns for a convolution, a
    convolution for a transposed one), the weight's a product with the
    patches (``im2col``) of the input (of the output's gradient, transposed),
    the bias's a sum."""
    _refuse_unless_2d(x, "convolution_backward")
    dtypes = (x.dtype, weight.dtype, grad_output.dtype)
    one_d = x.dim() == 3
    stride, padding, dilation = (_as_2d(v, x, fill) for v, fill in ((stride, 1), (padding, 0), (dilation, 1)))
    grad_output, x, weight = _widened(grad_output, x, weight)
    if one_d:
        grad_output, x, weight = grad_output.unsqueeze(2), x.unsqueeze(2), weight.unsqueeze(2)
    n = x.shape[0]
    kernel = list(weight.shape[2:])
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            grad_input = _forward_2d(grad_output, weight, None, stride, padding, dilation, groups)
        else:
            columns = _output_to_columns(weight, grad_output.reshape(n, grad_output.shape[1], -1), groups)
            grad_input = torch.ops.aten.col2im.default(columns, list(x.shape[2:]), kernel, dilation, padding, stride)
    if output_mask[1]:
        # The patches of what the weight multiplied, against what it made.
        patches_of, against = (grad_output, x) if transposed else (x, grad_output)
        columns = torch.ops.aten.im2col.default(patches_of, kernel, dilation, padding, stride)
        k_all, length = columns.shape[1], columns.shape[2]
        cols = columns.view(n, groups, k_all // groups, length).permute(1, 0, 3, 2).reshape(groups, n * length, -1)
        rows = against.reshape(n, groups, against.shape[1] // groups, length).permute(1, 2, 0, 3)
        grad_weight = torch.bmm(rows.reshape(groups, -1, n * length), cols).reshape(weight.shape)
    if output_mask[2]:
        grad_bias = grad_output.sum((0, 2, 3))
    if one_d:
        grad_input = None if grad_input is None else grad_input.squeeze(2)
        grad_weight = None if grad_weight is None else grad_weight.squeeze(2)
    return (None if grad_input is None else grad_input.to(dtypes[0]),
            None if grad_weight is None else grad_weight.to(dtypes[1]),
            None if grad_bias is None else grad_bias.to(dtypes[2]))


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


def adaptive_avg_pool2d_backward(grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``_adaptive_avg_pool2d_backward``, which PyTorch does not decompose:
    each output's gradient spread evenly over its window, which is
    separable, so ``A_h^T @ grad @ A_w`` with the windows' weight matrices
    (refused in bfloat16 and float16: decompositions._NOT_CPUS_IN_REDUCED_PRECISION)."""
    (h, w), (oh, ow) = x.shape[-2:], grad_output.shape[-2:]
    rows = _window_weights(h, oh, grad_output.dtype, grad_output.device)
    columns = _window_weights(w, ow, grad_output.dtype, grad_output.device)
    return torch.matmul(torch.matmul(rows.t(), grad_output), columns)
