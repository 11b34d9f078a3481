"""Convolutions as im2col, matrix products and col2im (torch_infini/decompositions/nn.py).

On the Infini stack ``convolution`` and ``convolution_backward`` have no
InfiniOps operator and no PyTorch decomposition: they run as ours (1-D as
2-D, 3-D as 2-D over the kernel's depth). The host
runtime has kernels for both, so these tests drive the decomposition hook
directly (``_C._decompose_as_kernel_for_test``: the hook, then the results laid
out as the meta run lays them out, as the stack's kernel does) and compare
with CPU's kernels (oneDNN's sums: close, not bit-equal).
"""

from __future__ import annotations

import pytest
import torch

from torch_infini import _C
from infini_testing import DEV, on_host

aten = torch.ops.aten


def _decompose(overload, *args):
    schema = overload._schema
    try:
        return _C._decompose_as_kernel_for_test(schema.name, schema.overload_name, *args)
    except NotImplementedError as refusal:
        return str(refusal)


def _on_device(value):
    return value.to(DEV) if isinstance(value, torch.Tensor) else value


def _check(got, expected, dtype=torch.float32):
    if isinstance(got, str) and not on_host() and "InfiniOps" in got:
        pytest.skip(f"an operator the decomposition calls is unserved on this InfiniOps build: {got}")
    assert not isinstance(got, str), f"refused: {got}"
    tol = {"rtol": 1.6e-2, "atol": 1e-2} if dtype == torch.bfloat16 else {"rtol": 1e-4, "atol": 1e-5}
    for g, e in zip(got if isinstance(got, (tuple, list)) else [got],
                    expected if isinstance(expected, (tuple, list)) else [expected], strict=True):
        if e is None:
            assert g is None
            continue
        assert (g.device.type, g.dtype, g.shape, g.stride()) == ("infini", e.dtype, e.shape, e.stride())
        torch.testing.assert_close(g.cpu(), e, **tol)


# name: (input shape, weight shape, bias, stride, padding, dilation, transposed, output_padding, groups)
CASES = {
    "conv2d": ((2, 3, 7, 6), (4, 3, 3, 3), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "conv2d_strided_padded_dilated": ((2, 4, 9, 8), (6, 4, 3, 2), True, [2, 1], [1, 2], [2, 1], False, [0, 0], 1),
    "conv2d_groups": ((1, 6, 5, 5), (9, 2, 3, 3), False, [1, 2], [1, 1], [1, 1], False, [0, 0], 3),
    "depthwise": ((2, 4, 6, 6), (4, 1, 3, 3), True, [1, 1], [1, 1], [1, 1], False, [0, 0], 4),
    "pointwise": ((3, 5, 4, 4), (7, 5, 1, 1), True, [1, 1], [0, 0], [1, 1], False, [0, 0], 1),
    "conv1d": ((2, 3, 11), (5, 3, 4), True, [2], [1], [1], False, [0], 1),
    "conv1d_groups_dilated": ((2, 4, 12), (6, 2, 3), False, [1], [2], [3], False, [0], 2),
    "conv_transpose2d": ((2, 3, 4, 5), (3, 4, 3, 3), True, [2, 2], [1, 0], [1, 1], True, [1, 0], 1),
    "conv_transpose2d_groups_dilated": ((1, 4, 5, 4), (4, 3, 2, 3), True, [1, 2], [0, 1], [2, 1], True, [0, 1], 2),
    "conv_transpose1d": ((2, 3, 6), (3, 2, 3), True, [3], [1], [1], True, [2], 1),
    # output_padding beyond the stride (dilation allows it): blocks the input never met.
    "conv_transpose2d_output_padding_past_stride": ((1, 2, 4, 3), (2, 2, 2, 3), True, [1, 2], [1, 1], [3, 3],
                                                    True, [2, 1], 1),
    "conv3d": ((2, 3, 5, 6, 7), (4, 3, 2, 3, 2), True, [1, 1, 1], [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1),
    "conv3d_strided_padded_dilated_groups": ((1, 4, 6, 5, 7), (6, 2, 3, 2, 3), True, [2, 1, 2], [1, 0, 1],
                                             [2, 1, 1], False, [0, 0, 0], 2),
    "conv_transpose3d": ((2, 4, 3, 4, 5), (4, 3, 2, 3, 2), True, [2, 1, 2], [1, 0, 1], [1, 2, 1], True,
                         [1, 0, 1], 2),
    "conv_transpose3d_output_padding_past_stride": ((1, 4, 4, 6, 3), (4, 2, 1, 2, 3), False, [2, 1, 1],
                                                    [0, 1, 1], [2, 2, 3], True, [0, 0, 1], 2),
}


def _args(case, dtype=torch.float32, channels_last=False):
    x_shape, w_shape, bias, *rest = CASES[case]
    torch.manual_seed(0)
    x = torch.randn(x_shape, dtype=dtype)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(w_shape, dtype=dtype)
    out_channels = w_shape[1] * rest[-1] if rest[3] else w_shape[0]
    b = torch.randn(out_channels, dtype=dtype) if bias else None
    return [x, w, b, *rest]


@pytest.mark.parametrize("case", sorted(CASES))
def test_convolution_matches_cpu(case):
    args = _args(case)
    _check(_decompose(aten.convolution.default, *map(_on_device, args)), aten.convolution.default(*args))


@pytest.mark.parametrize("case", ["conv2d", "conv_transpose2d"])
def test_bfloat16_and_channels_last_match_cpu(case):
    args = _args(case, torch.bfloat16)
    _check(_decompose(aten.convolution.default, *map(_on_device, args)), aten.convolution.default(*args),
           torch.bfloat16)
    args = _args(case, channels_last=True)
    _check(_decompose(aten.convolution.default, *map(_on_device, args)), aten.convolution.default(*args))


@pytest.mark.parametrize("mask", [[True, True, True], [True, False, False], [False, True, True]],
                         ids=["all", "input", "weight_bias"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_convolution_backward_matches_cpu(case, mask):
    x, w, b, stride, padding, dilation, transposed, output_padding, groups = _args(case)
    grad = torch.randn_like(aten.convolution.default(x, w, b, stride, padding, dilation, transposed,
                                                     output_padding, groups))
    bias_sizes = [b.shape[0]] if b is not None else [w.shape[1] * groups if transposed else w.shape[0]]
    args = [grad, x, w, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, mask]
    _check(_decompose(aten.convolution_backward.default, *map(_on_device, args)),
           aten.convolution_backward.default(*args))
