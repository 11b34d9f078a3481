"""Outputs laid out by meta functions match CPU's (ops/aten/aten_meta_fixes.h).

The Infini stack lays out every call's outputs by a run on meta tensors, and
the host runtime does so for the first call of each kind during a graph
capture. Where PyTorch's meta function and CPU's kernel disagree (a batch
norm's saved statistics in evaluation, a bfloat16 layer norm's statistics,
the V of an SVD), the result must still be CPU's: shape, dtype, strides and
values. On the host runtime the calls are captured; elsewhere they run
eagerly, laid out by meta as every call is.
"""

from __future__ import annotations

import pytest
import torch

import torch_infini
from infini_testing import on_host

DEV = "infini"
aten = torch.ops.aten
GRAPHS = torch_infini.diagnostics()["capabilities"]["graphs"]


def _norm_args(dtype, params=None, channels=3, shape=(2, 3, 5)):
    """A batch norm's arguments: input, weight, bias, running mean and var."""
    params = params or dtype
    torch.manual_seed(0)
    x = torch.randn(*shape).to(dtype)
    w, b = torch.randn(channels).to(params), torch.randn(channels).to(params)
    return x, w, b, torch.zeros(channels).to(params), torch.ones(channels).to(params)


def _maxpooled(channels_last: bool, size: int):
    torch.manual_seed(0)
    pooled, indices = torch.nn.functional.max_pool2d(torch.randn(2, 3, size, size), 2, return_indices=True)
    if channels_last:
        pooled = pooled.contiguous(memory_format=torch.channels_last)
    return pooled, indices


def _batch_norm_out(x, w, b, rm, rv):
    outs = [torch.empty(0, dtype=x.dtype, device=x.device) for _ in range(3)]
    aten.native_batch_norm.out(x, w, b, rm, rv, False, 0.1, 1e-5, out=outs[0], save_mean=outs[1],
                               save_invstd=outs[2])
    return outs


# name: (call, arguments made on the CPU). Shapes differ from case to case and
# from other tests: the host runtime lays out by meta only the first call of
# a kind.
CASES = {
    "batch_norm_eval_bfloat16": (lambda *a: aten.native_batch_norm(*a, False, 0.1, 1e-5),
                                 _norm_args(torch.bfloat16, shape=(2, 3, 7))),
    "batch_norm_eval_float32": (lambda *a: aten.native_batch_norm(*a, False, 0.1, 1e-5),
                                _norm_args(torch.float32, shape=(2, 3, 9))),
    "batch_norm_eval_out": (_batch_norm_out, _norm_args(torch.float32, shape=(2, 3, 11))),
    "batch_norm_train_bfloat16": (lambda *a: aten.native_batch_norm(*a, True, 0.1, 1e-5),
                                  _norm_args(torch.bfloat16, shape=(2, 3, 13))),
    "batch_norm_train_mixed": (lambda *a: aten.native_batch_norm(*a, True, 0.1, 1e-5),
                               _norm_args(torch.bfloat16, torch.float32, shape=(2, 3, 15))),
    "batch_norm_legit_eval": (lambda *a: aten._native_batch_norm_legit(*a, False, 0.1, 1e-5),
                              _norm_args(torch.bfloat16, shape=(2, 3, 17))),
    "batch_norm_legit_no_training": (lambda *a: aten._native_batch_norm_legit_no_training(*a, 0.1, 1e-5),
                                     _norm_args(torch.float32, shape=(2, 3, 19))),
    "layer_norm_bfloat16": (lambda x, w: aten.native_layer_norm(x, [6], w, None, 1e-5),
                            (torch.randn(2, 3, 6).bfloat16(), torch.randn(6).bfloat16())),
    "layer_norm_half_no_weight": (lambda x: aten.native_layer_norm(x, [4], None, None, 1e-5),
                                  (torch.randn(3, 5, 4).half(),)),
    "layer_norm_mixed": (lambda x, w: aten.native_layer_norm(x, [8], w, None, 1e-5),
                         (torch.randn(2, 3, 8).bfloat16(), torch.randn(8))),
    "group_norm_mixed": (lambda x, w, b: aten.native_group_norm(x, w, b, 2, 4, 6, 2, 1e-5),
                         (torch.randn(2, 4, 6).bfloat16(), torch.randn(4), torch.randn(4))),
    "svd": (lambda a: aten._linalg_svd(a, True, True), (torch.randn(3, 7),)),
    "svd_batched_reduced": (lambda a: aten._linalg_svd(a, False, True), (torch.randn(2, 7, 4),)),
    "max_unpool2d_channels_last": (lambda p, i: aten.max_unpool2d(p, i, [6, 6]), _maxpooled(True, 6)),
    "max_unpool2d": (lambda p, i: aten.max_unpool2d(p, i, [8, 8]), _maxpooled(False, 8)),
    "convolution_channels_last_input": (
        lambda x, w: aten.convolution(x, w, None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1),
        (torch.randn(2, 4, 5, 5).contiguous(memory_format=torch.channels_last), torch.randn(3, 4, 3, 3))),
    "convolution_channels_last_weight_transposed": (
        lambda x, w: aten.convolution(x, w, None, [2, 2], [0, 0], [1, 1], True, [1, 1], 1),
        (torch.randn(2, 4, 5, 5), torch.randn(4, 3, 3, 3).contiguous(memory_format=torch.channels_last))),
    # A batch norm's output in the input's suggested memory format (the meta
    # function keeps the input's strides; and CPU's out= kernel computes a
    # 3-D input with the channels innermost wrongly: test_repeated_calls.py).
    "batch_norm_train_channels_innermost_3d": (
        lambda *a: aten.native_batch_norm(*a, True, 0.1, 1e-5),
        (torch.randn(2, 21, 3).transpose(1, 2), *_norm_args(torch.float32, shape=(2, 3, 21))[1:])),
    "batch_norm_eval_permuted_3d": (
        lambda *a: aten.native_batch_norm(*a, False, 0.1, 1e-5),
        (torch.randn(23, 2, 3).permute(1, 2, 0), *_norm_args(torch.float32, shape=(2, 3, 23))[1:])),
    "batch_norm_train_channels_last_4d": (
        lambda *a: aten.native_batch_norm(*a, True, 0.1, 1e-5),
        (torch.randn(2, 3, 5, 5).contiguous(memory_format=torch.channels_last),
         *_norm_args(torch.float32, shape=(2, 3, 25))[1:])),
    "batch_norm_legit_no_stats_transposed": (
        lambda x: aten._native_batch_norm_legit.no_stats(x, None, None, True, 0.0, 1e-5),
        (torch.randn(1, 9, 4).transpose(1, 2),)),
    # bool ** True is bool on CPU, int64 by the meta function; the numbers
    # promote as CPU promotes them.
    "pow_bool_by_true": (lambda x: torch.pow(x, True), (torch.tensor([True, False, True]),)),
    "pow_bool_by_false": (lambda x: torch.pow(x, False), (torch.tensor([True, False, False, True]),)),
    "pow_int_by_a_float": (lambda x: torch.pow(x, 0.5), (torch.arange(5, dtype=torch.int32),)),
    "pow_half_by_an_int": (lambda x: torch.pow(x, 3), (torch.randn(6).half(),)),
}


def _flat(result):
    return [t for t in (result if isinstance(result, (tuple, list)) else [result]) if isinstance(t, torch.Tensor)]


def _run_laid_out_by_meta(call, args):
    """The call on infini, its outputs laid out by its meta function."""
    on_device = [a.to(DEV) for a in args]
    if not on_host():
        return _flat(call(*on_device))
    assert GRAPHS, "the host runtime captures graphs"
    graph = torch.infini.InfiniGraph()
    with torch.infini.graph(graph):
        outputs = _flat(call(*on_device))
    graph.replay()
    return outputs


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_are_laid_out_as_cpu_lays_them_out(case):
    call, args = CASES[case]
    want = _flat(call(*[a.clone() for a in args]))
    got = _run_laid_out_by_meta(call, args)
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        assert (g.shape, g.dtype) == (w.shape, w.dtype), f"result {i}"
        if w.numel() > 1:
            assert g.stride() == w.stride(), f"result {i}"
        torch.testing.assert_close(g.cpu(), w, msg=f"result {i}")
