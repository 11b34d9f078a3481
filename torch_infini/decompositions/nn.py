"""Convolutions, pooling gradients, layer norm and dropout's gradient for the Infini stack.

Convolutions as ``im2col``, matrix products and ``col2im``; layer norm as
batch norm's statistics of its rows, where the provider serves batch norm,
and its gradient in twelve calls; dropout's gradient as CPU computes it.

ATen's ``convolution`` and ``convolution_backward`` have no InfiniOps
operator and no decomposition in PyTorch; InfiniOps' ATen-backed ``im2col``,
``col2im`` and ``matmul`` (over its ``Gemm``) compute them as ATen's own slow
convolutions do: the input's patches as columns, one product per group, and
for a transposed convolution (and the input's gradient) the columns summed
back into place by ``col2im``. 1-D convolutions run as 2-D ones of height 1,
3-D ones as 2-D ones over the kernel's depth. bfloat16 and float16 are computed in float32 and
rounded once, as CPU's oneDNN kernels accumulate. CPU's errors come first,
from the meta function; results are laid out as it lays them out
(csrc/ops/aten/aten_decompose.cpp).
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from . import provider

_REDUCED = (torch.bfloat16, torch.float16)


def _as_nd(values: Sequence[int], x: torch.Tensor, fill: int) -> list[int]:
    """A parameter as the 2-D (or 3-D) convolution's: a 1-D one's (height 1)
    gets ``fill`` for the height; a single value stands for every dimension."""
    values = list(values)
    if x.dim() == 3:
        return [fill] + values
    return values * (x.dim() - 2) if len(values) == 1 else values


def _widened(*tensors: torch.Tensor | None) -> list[torch.Tensor | None]:
    return [t.float() if t is not None and t.dtype in _REDUCED else t for t in tensors]


# The three 2-D computations every convolution here is made of, on 4-D
# tensors: a convolution, its adjoint (the input's gradient, and a
# transposed convolution), and the weight's gradient.

def _conv2d(x, weight, stride, padding, dilation, groups):
    """Per group, ``weight (O/g, K) @ im2col(x) (N, K, L)``."""
    n, _, h, w = x.shape
    kernel = list(weight.shape[2:])
    columns = torch.ops.aten.im2col.default(x, kernel, dilation, padding, stride)
    out_h = (h + 2 * padding[0] - dilation[0] * (kernel[0] - 1) - 1) // stride[0] + 1
    out_w = (w + 2 * padding[1] - dilation[1] * (kernel[1] - 1) - 1) // stride[1] + 1
    k_all, length = columns.shape[1], columns.shape[2]
    out_channels = weight.shape[0]
    wg = weight.reshape(groups, out_channels // groups, -1)
    out = torch.matmul(wg, columns.view(n, groups, k_all // groups, length))
    return out.reshape(n, out_channels, out_h, out_w)


def _conv2d_adjoint(y, weight, size, stride, padding, dilation, groups):
    """Per group, ``weight^T (K, C/g) @ y (N, C/g, L)``, the columns summed
    into place (``col2im``) over an input of spatial ``size``. They are
    summed on the unpadded canvas the blocks cover exactly, then cut to
    ``size`` (a transposed convolution's ``output_padding`` may ask for more
    rows than the blocks reach, or fewer: col2im takes one padding for both
    sides and wants exactly the blocks)."""
    n, channels = y.shape[:2]
    kernel = list(weight.shape[2:])
    wg = weight.reshape(groups, channels // groups, -1).transpose(1, 2)
    columns = torch.matmul(wg, y.reshape(n, groups, channels // groups, -1)).reshape(n, wg.shape[1] * groups, -1)
    canvas = [(blocks - 1) * s + d * (k - 1) + 1
              for blocks, s, d, k in zip(y.shape[2:], stride, dilation, kernel)]
    full = torch.ops.aten.col2im.default(columns, canvas, kernel, dilation, [0, 0], stride)
    (ph, pw), (h, w) = padding, size
    inside_h, inside_w = max(0, min(h, canvas[0] - ph)), max(0, min(w, canvas[1] - pw))
    if (inside_h, inside_w) == (h, w):
        return full[:, :, ph:ph + h, pw:pw + w]
    out = full.new_zeros(n, full.shape[1], h, w)
    out[:, :, :inside_h, :inside_w] = full[:, :, ph:ph + inside_h, pw:pw + inside_w]
    return out


def _conv2d_weight_grad(patches_of, against, kernel, stride, padding, dilation, groups):
    """The weight's gradient: per group, ``against (C/g, N L) @
    im2col(patches_of)^T (N L, K)``; (C, K/g-by-kernel) as the weight."""
    n = patches_of.shape[0]
    columns = torch.ops.aten.im2col.default(patches_of, kernel, dilation, padding, stride)
    blocks = [(size + 2 * p - d * (k - 1) - 1) // s + 1
              for size, p, d, k, s in zip(patches_of.shape[2:], padding, dilation, kernel, stride)]
    wanted = list(against.shape[2:])
    if blocks != wanted:  # a transposed convolution's output_padding adds blocks its input never met
        columns = columns.view(n, columns.shape[1], *blocks)[:, :, :wanted[0], :wanted[1]].reshape(
            n, columns.shape[1], -1)
    k_all, length = columns.shape[1], columns.shape[2]
    cols = columns.view(n, groups, k_all // groups, length).permute(1, 0, 3, 2).reshape(groups, n * length, -1)
    rows = against.reshape(n, groups, against.shape[1] // groups, length).permute(1, 2, 0, 3)
    out = torch.bmm(rows.reshape(groups, -1, n * length), cols)
    return out.reshape(against.shape[1], k_all // groups // (kernel[0] * kernel[1]), *kernel)


# 3-D convolutions as 2-D ones over the kernel's depth: the input padded in
# depth, for each kernel depth kd the slices at kd * dilation + stride * j
# (j over the output's depth) are a batch of 2-D inputs, and their 2-D
# results are summed (a convolution) or added back at those slices (its
# adjoint).

def _depth_slices(x, kd, out_depth, stride, dilation):
    """(N, C, out_depth, H, W) -> (N * out_depth, C, H, W)."""
    start = kd * dilation
    s = x[:, :, start:start + stride * (out_depth - 1) + 1:stride]
    return s.transpose(1, 2).reshape(-1, x.shape[1], *x.shape[3:])


def _batched(y, n):
    """(N * D, C, H, W) -> (N, C, D, H, W)."""
    return y.reshape(n, -1, *y.shape[1:]).transpose(1, 2)


def _padded_depth(x, pad):
    if pad == 0:
        return x
    out = x.new_zeros(x.shape[0], x.shape[1], x.shape[2] + 2 * pad, *x.shape[3:])
    out[:, :, pad:pad + x.shape[2]] = x
    return out


def _conv3d(x, weight, stride, padding, dilation, groups):
    k = weight.shape[2]
    xp = _padded_depth(x, padding[0])
    out_depth = (xp.shape[2] - dilation[0] * (k - 1) - 1) // stride[0] + 1
    out = None
    for kd in range(k):
        part = _conv2d(_depth_slices(xp, kd, out_depth, stride[0], dilation[0]), weight[:, :, kd],
                       stride[1:], padding[1:], dilation[1:], groups)
        out = part if out is None else out + part
    return _batched(out, x.shape[0])


def _conv3d_adjoint(y, weight, size, stride, padding, dilation, groups):
    """The input's gradient of a 3-D convolution whose input has spatial
    ``size`` and output gradient ``y``."""
    n, k, out_depth = y.shape[0], weight.shape[2], y.shape[2]
    y2 = y.transpose(1, 2).reshape(-1, y.shape[1], *y.shape[3:])
    grad = y.new_zeros(n, weight.shape[1] * groups, size[0] + 2 * padding[0], *size[1:])
    positions = torch.arange(out_depth, device=y.device) * stride[0]
    for kd in range(k):
        part = _conv2d_adjoint(y2, weight[:, :, kd], size[1:], stride[1:], padding[1:], dilation[1:], groups)
        grad.index_add_(2, positions + kd * dilation[0], _batched(part, n))
    return grad[:, :, padding[0]:padding[0] + size[0]]


def _conv3d_weight_grad(patches_of, against, kernel, stride, padding, dilation, groups):
    xp = _padded_depth(patches_of, padding[0])
    out_depth = against.shape[2]
    a2 = against.transpose(1, 2).reshape(-1, against.shape[1], *against.shape[3:])
    parts = [_conv2d_weight_grad(_depth_slices(xp, kd, out_depth, stride[0], dilation[0]), a2, kernel[1:],
                                 stride[1:], padding[1:], dilation[1:], groups) for kd in range(kernel[0])]
    return torch.stack(parts, 2)


_CONV = {2: (_conv2d, _conv2d_adjoint, _conv2d_weight_grad), 3: (_conv3d, _conv3d_adjoint, _conv3d_weight_grad)}


def _transposed_size(x, weight, stride, padding, dilation, output_padding):
    return [(d - 1) * s - 2 * p + dil * (k - 1) + op + 1
            for d, s, p, dil, k, op in zip(x.shape[2:], stride, padding, dilation, weight.shape[2:], output_padding)]


def convolution(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> torch.Tensor:
    """``aten::convolution`` (every ``conv*d`` and ``conv_transpose*d``
    reaches it): 1-D as 2-D, 2-D, 3-D as 2-D over the kernel's depth."""
    dtype = x.dtype
    one_d = x.dim() == 3
    stride, padding, dilation, output_padding = (
        _as_nd(v, x, fill) for v, fill in ((stride, 1), (padding, 0), (dilation, 1), (output_padding, 0)))
    x, weight, bias = _widened(x, weight, bias)
    if one_d:
        x, weight = x.unsqueeze(2), weight.unsqueeze(2)
    conv, adjoint, _ = _CONV[x.dim() - 2]
    if transposed:
        size = _transposed_size(x, weight, stride, padding, dilation, output_padding)
        out = adjoint(x, weight, size, stride, padding, dilation, groups)
    else:
        out = conv(x, weight, stride, padding, dilation, groups)
    if bias is not None:
        out = out + bias.view(1, -1, *([1] * (out.dim() - 2)))
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
    dtypes = (x.dtype, weight.dtype, grad_output.dtype)
    one_d = x.dim() == 3
    stride, padding, dilation = (_as_nd(v, x, fill) for v, fill in ((stride, 1), (padding, 0), (dilation, 1)))
    grad_output, x, weight = _widened(grad_output, x, weight)
    if one_d:
        grad_output, x, weight = grad_output.unsqueeze(2), x.unsqueeze(2), weight.unsqueeze(2)
    conv, adjoint, weight_grad = _CONV[x.dim() - 2]
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        if transposed:
            # output_padding may add blocks the input never met: they are cut.
            grad_input = conv(grad_output, weight, stride, padding, dilation, groups)
            grad_input = grad_input[(slice(None), slice(None), *(slice(0, d) for d in x.shape[2:]))]
        else:
            grad_input = adjoint(grad_output, weight, x.shape[2:], stride, padding, dilation, groups)
    if output_mask[1]:
        # The patches of what the weight multiplied, against what it made.
        patches_of, against = (grad_output, x) if transposed else (x, grad_output)
        grad_weight = weight_grad(patches_of, against, list(weight.shape[2:]), stride, padding, dilation, groups)
    if output_mask[2]:
        grad_bias = grad_output.sum([0, *range(2, grad_output.dim())])
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


def adaptive_avg_pool3d(x: torch.Tensor, output_size: Sequence[int]) -> torch.Tensor:
    """``_adaptive_avg_pool3d`` (what ``F.adaptive_avg_pool3d`` calls), as
    InfiniOps' ``adaptive_avg_pool3d.out``: ATen's kernel of both is one
    (``adaptive_avg_pool3d_out_cpu_template``), so this is CPU's result bit
    for bit, laid out by the ``.out`` overload's meta function
    (``torch_infini/_meta_kernels.py``)."""
    return torch.ops.aten.adaptive_avg_pool3d.out(x, output_size, out=x.new_empty(0))


def adaptive_avg_pool3d_backward(grad_output: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``_adaptive_avg_pool3d_backward``, as InfiniOps'
    ``adaptive_avg_pool3d_backward.grad_input`` (one ATen kernel, as above)."""
    return torch.ops.aten.adaptive_avg_pool3d_backward.grad_input(grad_output, x, grad_input=x.new_empty(0))


def native_layer_norm(x: torch.Tensor, normalized_shape: Sequence[int], weight: torch.Tensor | None,
                      bias: torch.Tensor | None, eps: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``native_layer_norm`` as batch norm's training statistics of its rows
    (``x`` viewed as one sample of ``rows`` channels of the row's length:
    the mean, and the inverse square root of the biased variance plus
    ``eps``, as layer norm's) and one ``addcmul`` for the weight and bias:
    two calls where PyTorch's decomposition makes eight (a layer norm in
    every transformer block). Where the provider has no batch norm of its
    own, and for the dtypes whose statistics CPU keeps in another dtype
    than the input's (reduced precision), or rows of fewer than two
    elements, PyTorch's decomposition."""
    axis = x.dim() - len(normalized_shape)
    rows, length = math.prod(x.shape[:axis]), math.prod(normalized_shape)
    params = [p for p in (weight, bias) if p is not None]
    if (x.dtype not in (torch.float32, torch.float64) or rows == 0 or length < 2
            or any(p.dtype != x.dtype for p in params)
            or not provider.serves("aten::_native_batch_norm_legit.no_stats")):
        from torch._decomp import decomposition_table

        return decomposition_table[torch.ops.aten.native_layer_norm.default](x, normalized_shape, weight, bias, eps)
    normalized, mean, rstd = torch.ops.aten._native_batch_norm_legit.no_stats(
        x.reshape(1, rows, length), None, None, True, 0.0, eps)
    out = normalized.view(x.shape)
    if weight is not None and bias is not None:
        out = torch.addcmul(bias, out, weight)
    elif weight is not None:
        out = out * weight
    elif bias is not None:
        out = out + bias
    stats = list(x.shape[:axis]) + [1] * len(normalized_shape)
    return out, mean.view(stats), rstd.view(stats)


def native_layer_norm_backward(grad_out: torch.Tensor, x: torch.Tensor, normalized_shape: Sequence[int],
                               mean: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor | None,
                               bias: torch.Tensor | None, output_mask: Sequence[bool],
                               ) -> tuple[torch.Tensor | None, torch.Tensor | None, torch.Tensor | None]:
    """``native_layer_norm_backward`` in twelve calls where PyTorch's
    decomposition makes fifteen (two layer norms in every transformer
    block's backward). Per row of ``x`` (``x_hat = (x - mean) * rstd``,
    ``g = grad_out * weight``): the input's gradient is
    ``rstd * (g - mean(g) - x_hat * mean(g * x_hat))``, the weight's the sum
    of ``grad_out * x_hat`` over the rows, the bias's that of ``grad_out``.
    The same formula as PyTorch's (which scales by the row length and divides
    it back out), rounded differently; CPU's kernel rounds another way again.
    For float32 and float64 tensors of one dtype, where the provider serves
    each operator it calls; otherwise PyTorch's."""
    axis = x.dim() - len(normalized_shape)
    rows, length = math.prod(x.shape[:axis]), math.prod(normalized_shape)
    tensors = [t for t in (grad_out, x, mean, rstd, weight, bias) if t is not None]
    if (x.dtype not in (torch.float32, torch.float64) or rows == 0 or length == 0
            or any(t.dtype != x.dtype for t in tensors)
            or not provider.serves("aten::sub.out", "aten::mul.out", "aten::addcmul.out", "aten::sum.IntList_out")):
        from torch._decomp import decomposition_table

        return decomposition_table[torch.ops.aten.native_layer_norm_backward.default](
            grad_out, x, normalized_shape, mean, rstd, weight, bias, output_mask)
    g = grad_out.reshape(rows, length)
    r = rstd.reshape(rows, 1)
    x_hat = (x.reshape(rows, length) - mean.reshape(rows, 1)) * r
    d_input = d_weight = d_bias = None
    if output_mask[0]:
        g_hat = g * weight.reshape(length) if weight is not None else g
        # The row means as sums scaled in the next call (ATen's mean is a
        # sum and a division: two kernels).
        centred = torch.sub(g_hat, g_hat.sum(1, keepdim=True), alpha=1 / length)
        projected = (g_hat * x_hat).sum(1, keepdim=True)
        d_input = (torch.addcmul(centred, x_hat, projected, value=-1 / length) * r).view(x.shape)
    if output_mask[1] and weight is not None:
        d_weight = (g * x_hat).sum(0).view(weight.shape)
    if output_mask[2] and bias is not None:
        d_bias = g.sum(0).view(bias.shape)
    return d_input, d_weight, d_bias


def native_dropout_backward(grad_output: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
    """``native_dropout_backward`` as CPU's kernel computes it,
    ``grad_output * mask * scale``: two calls, bit for bit CPU's. PyTorch's
    decomposition (four calls) rounds as ``grad_output * (mask * scale)``.
    PyTorch takes the fused dropout for a PrivateUse1 device, where CPU
    takes ``bernoulli_`` and a product: this is every dropout's gradient."""
    return grad_output * mask * scale
