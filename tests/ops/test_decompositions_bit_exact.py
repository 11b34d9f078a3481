"""Decompositions that compute what CPU's kernel computes bit for bit
(torch_infini/decompositions/{segments,sampling,distances,arithmetic,nn}.py).

``segment_reduce``, ``_embedding_bag``, ``grid_sampler_3d``,
``hash_tensor``, the distances of ``cdist``/``pdist`` and the 3-D adaptive
average pooling, which InfiniOps lacks (or serves under another name), run
on the Infini stack as these decompositions. Where CPU's kernel adds (or
multiplies, compares) in an order the decomposition keeps, its results are
CPU's exactly: values, NaNs, dtypes, shapes and strides, the auxiliary
results a backward reads included; CPU's errors from the values are raised
with CPU's words. Driven through the runner the kernel calls
(``decompositions.run``), on the device, against CPU's kernels.
"""

from __future__ import annotations

import math

import pytest
import torch

from torch_infini import decompositions
from infini_testing import DEV, on_host

aten = torch.ops.aten


def _device(value):
    if isinstance(value, torch.Tensor):
        return value.to(DEV)
    if isinstance(value, (list, tuple)):
        return type(value)(_device(v) for v in value)
    return value


def _run(name: str, *args, **kwargs):
    try:
        return decompositions.run(name, _device(args), {k: _device(v) for k, v in kwargs.items()})
    except NotImplementedError as refusal:
        if not on_host() and "InfiniOps" in str(refusal):
            pytest.skip(f"an operator the decomposition calls is unserved on this InfiniOps build: {refusal}")
        raise


def _assert_cpus(got, expected, exact: bool = True) -> None:
    got = got if isinstance(got, tuple) else (got,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.device.type == "infini"
        g = g.cpu()
        assert (g.dtype, g.shape, g.stride()) == (e.dtype, e.shape, e.stride())
        if e.dtype == torch.uint64:
            g, e = g.view(torch.int64), e.view(torch.int64)
        if exact:
            assert torch.equal(g.nan_to_num(7.0), e.nan_to_num(7.0)) and torch.equal(g.isnan(), e.isnan()), (g, e)
        else:
            torch.testing.assert_close(g, e, equal_nan=True)


_DATA = torch.randn(6, 2)
_NANS = torch.tensor([1.0, float("nan"), 3.0, -4.0, 0.0, 2.0]).view(6, 1)


@pytest.mark.parametrize("initial", [None, 2.5])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("case", ["lengths", "offsets", "2d_lengths_axis1", "nans", "bfloat16_mean"])
def test_segment_reduce_is_cpus(case, reduce, initial):
    """Empty segments (NaN for a mean without ``initial``), NaN propagating
    through max/min, lengths per row along ``axis``, offsets."""
    data, kwargs = {
        "lengths": (_DATA, {"lengths": torch.tensor([2, 0, 3, 1])}),
        "offsets": (_DATA, {"offsets": torch.tensor([0, 2, 2, 5, 6])}),
        "2d_lengths_axis1": (torch.randn(2, 6, 3), {"lengths": torch.tensor([[2, 4], [6, 0]]), "axis": 1}),
        "nans": (_NANS, {"lengths": torch.tensor([3, 3])}),
        "bfloat16_mean": (torch.randn(300, 2).bfloat16(), {"lengths": torch.tensor([1, 299])}),
    }[case]
    expected = aten.segment_reduce.default(data, reduce, initial=initial, **kwargs)
    _assert_cpus(_run("aten::segment_reduce", data, reduce, initial=initial, **kwargs), expected)


@pytest.mark.parametrize("unsafe", [False, True])
@pytest.mark.parametrize("lengths", [[2, -1, 5], [2, 0, 3]])
def test_segment_reduce_raises_cpus_errors_from_the_lengths(lengths, unsafe):
    """A negative length, and (unless ``unsafe``) lengths not summing to the
    data's size: CPU reads them back and refuses, so does the device."""
    def outcome(run):
        try:
            return run()
        except RuntimeError as error:
            return str(error)

    expected = outcome(lambda: aten.segment_reduce.default(_DATA, "sum", lengths=torch.tensor(lengths),
                                                           unsafe=unsafe))
    got = outcome(lambda: _run("aten::segment_reduce", _DATA, "sum", lengths=torch.tensor(lengths), unsafe=unsafe))
    if isinstance(expected, str):
        assert got == expected
    else:
        _assert_cpus(got, expected)


_TIES_ZEROS_NANS = torch.tensor([1.0, 3.0, 3.0, 0.0, 2.0, float("nan"), 5.0, -1.0, 4.0]).view(9, 1).expand(9, 2)


@pytest.mark.parametrize("initial", [None, 2.0])
@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("case", ["ties_zeros_nans", "offsets", "2d_lengths_axis1", "short_lengths"])
def test_segment_reduce_gradient_is_cpus(case, reduce, initial):
    """Ties of the maximum (shared only by positive gradients, as CPU's
    kernel shares them), zeros and NaNs in a product (the others' product
    from ``initial``, in order), empty segments, elements past the last
    segment (no gradient)."""
    torch.manual_seed(0)
    data, kwargs = {
        "ties_zeros_nans": (_TIES_ZEROS_NANS.contiguous(), {"lengths": torch.tensor([3, 0, 2, 3, 1])}),
        "offsets": (_DATA, {"offsets": torch.tensor([0, 2, 2, 5, 6])}),
        "2d_lengths_axis1": (torch.tensor([[1.0, 0.0, 2.0, 3.0, 3.0, 1.0], [0.0, 0.0, 1.0, 2.0, 2.0, 2.0]]).unsqueeze(-1),
                             {"lengths": torch.tensor([[2, 4], [5, 1]]), "axis": 1}),
        "short_lengths": (torch.randn(7, 3), {"lengths": torch.tensor([2, 3])}),
    }[case]
    output = aten.segment_reduce.default(data, reduce, initial=initial, unsafe=True, **kwargs)
    grad = torch.randn_like(output)
    expected = aten._segment_reduce_backward.default(grad, output, data, reduce, initial=initial, **kwargs)
    _assert_cpus(_run("aten::_segment_reduce_backward", grad, output, data, reduce, initial=initial, **kwargs),
                 expected)


_WEIGHT = torch.randn(10, 3)
_INDICES = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])


@pytest.mark.parametrize("padding_idx", [-1, 4])
@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sum", "mean", "max"])
@pytest.mark.parametrize("weight", ["float32", "float64", "strided_rows", "ties"])
@pytest.mark.parametrize("include_last_offset", [False, True])
def test_embedding_bag_is_cpus_with_its_auxiliary_results(weight, mode, padding_idx, include_last_offset):
    """The bags' sums, means and maxima (an empty bag, padding rows left
    out, ties keeping the first row), and the results the backward reads:
    each index's bag (empty on CPU's fast path for sums), the bags' sizes,
    the maxima's indices."""
    w = {"float32": _WEIGHT, "float64": _WEIGHT.double(), "strided_rows": _WEIGHT.t().contiguous().t(),
         "ties": torch.randint(0, 3, (10, 3)).float()}[weight]
    offsets = torch.tensor([0, 4, 4, 6, 8] if include_last_offset else [0, 4, 4, 6])
    args = (w, _INDICES, offsets, False, mode, False, None, include_last_offset, padding_idx)
    _assert_cpus(_run("aten::_embedding_bag", *args), aten._embedding_bag.default(*args))


def test_embedding_bag_with_int32_indices():
    args = (_WEIGHT, _INDICES.int(), torch.tensor([0, 4, 4, 6]).int(), False, 2, False, None, False, -1)
    _assert_cpus(_run("aten::_embedding_bag", *args), aten._embedding_bag.default(*args))


def test_embedding_bag_with_per_sample_weights():
    """CPU's fast path fuses each row's product with the weight into the sum
    (one rounding fewer): the sums agree within float32's tolerance, the
    auxiliary results exactly."""
    args = (_WEIGHT, _INDICES, torch.tensor([0, 4, 4, 6]), False, 0, False, torch.randn(8), False, -1)
    got, expected = _run("aten::_embedding_bag", *args), aten._embedding_bag.default(*args)
    _assert_cpus(got[0], expected[0], exact=False)
    _assert_cpus(got[1:], expected[1:])


@pytest.mark.parametrize("scale_grad_by_freq", [False, True])
@pytest.mark.parametrize("padding_idx", [-1, 4])
@pytest.mark.parametrize("mode", ["sum", "sum_weighted", "mean", "max"])
def test_embedding_bag_gradients_are_cpus(mode, padding_idx, scale_grad_by_freq):
    """The weight's gradient: each index's bag gradient added into its row in
    CPU's order (indices sorted), scaled as the running release's CPU scales
    it (up to 2.13 the frequency divisor comes from the run's position among
    the sorted indices, from 2.14 from the index's own count); a maximum's
    into the row that held it. Bit for bit where no
    scale is applied; where one is, CPU's axpy fuses it (within tolerance).
    The per-sample weights' gradient: each bag gradient dotted with its row."""
    torch.manual_seed(0)
    weight, indices, offsets = torch.randn(10, 3), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 4]), torch.tensor([0, 4, 4, 6])
    per_sample = torch.rand(9) if mode == "sum_weighted" else None
    code = {"sum": 0, "sum_weighted": 0, "mean": 1, "max": 2}[mode]
    out, offset2bag, bag_size, maximum = aten._embedding_bag.default(
        weight, indices, offsets, scale_grad_by_freq, code, False, per_sample, False, padding_idx)
    if offset2bag.numel() == 0:  # CPU's fast path leaves it to the backward, which makes it so
        offset2bag = (torch.arange(9).unsqueeze(-1) >= offsets.unsqueeze(0)).sum(-1) - 1
    grad = torch.randn_like(out)
    args = (grad, indices, offset2bag, bag_size, maximum, 10, scale_grad_by_freq, code, per_sample, padding_idx)
    exact = mode in ("sum", "max") and not scale_grad_by_freq
    _assert_cpus(_run("aten::_embedding_bag_dense_backward", *args),
                 aten._embedding_bag_dense_backward.default(*args), exact=exact)
    if per_sample is not None:
        args = (grad, weight, indices, offsets, offset2bag, code, padding_idx)
        _assert_cpus(_run("aten::_embedding_bag_per_sample_weights_backward", *args),
                     aten._embedding_bag_per_sample_weights_backward.default(*args), exact=False)


@pytest.mark.parametrize("mode", [0, 1, 2], ids=["sum", "mean", "max"])
def test_embedding_bag_backward_numbers_the_bags_where_cpus_fast_path_did_not(mode):
    """``_embedding_bag_backward``, which autograd calls, with the forward's
    own auxiliary results (an empty ``offset2bag`` from CPU's fast path for
    sums); a sparse gradient is refused, naming ``sparse=True``."""
    weight, indices, offsets = torch.randn(10, 3), torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 4, 4, 6])
    out, offset2bag, bag_size, maximum = aten._embedding_bag.default(weight, indices, offsets, False, mode)
    grad = torch.randn_like(out)
    args = (grad, indices, offsets, offset2bag, bag_size, maximum, 10, False, mode, False, None, -1)
    _assert_cpus(_run("aten::_embedding_bag_backward", *args), aten._embedding_bag_backward.default(*args),
                 exact=mode != 1)
    sparse = args[:9] + (True,) + args[10:]
    with pytest.raises(NotImplementedError, match="sparse=True"):
        decompositions.run("aten::_embedding_bag_backward", _device(sparse), {})


@pytest.mark.parametrize("align_corners", [False, True])
@pytest.mark.parametrize("padding_mode", [0, 1, 2], ids=["zeros", "border", "reflection"])
@pytest.mark.parametrize("mode", [0, 1], ids=["bilinear", "nearest"])
def test_grid_sampler_3d_is_cpus(mode, padding_mode, align_corners):
    """Points inside, outside and on the edges of the volume (the grid spans
    beyond [-1, 1]), each padding mode."""
    torch.manual_seed(0)
    x, grid = torch.randn(2, 3, 4, 5, 6), torch.rand(2, 3, 4, 2, 3) * 2.4 - 1.2
    args = (x, grid, mode, padding_mode, align_corners)
    _assert_cpus(_run("aten::grid_sampler_3d", *args), aten.grid_sampler_3d.default(*args))


def test_grid_sampler_3d_is_refused_in_bfloat16():
    x, grid = torch.randn(1, 1, 2, 2, 2).bfloat16(), torch.zeros(1, 1, 1, 1, 3).bfloat16()
    with pytest.raises(NotImplementedError, match="bfloat16"):
        decompositions.run("aten::grid_sampler_3d", _device((x, grid, 0, 0, False)), {})


@pytest.mark.parametrize("keepdim", [False, True])
@pytest.mark.parametrize("dim", [[], [0], [-1], [0, 1]], ids=["all", "first", "last", "both"])
@pytest.mark.parametrize("x", [torch.randn(3, 5), torch.randint(-9, 9, (5, 3)), torch.randn(3, 4, 5).double(),
                               torch.tensor([[True, False, True]]), torch.randn(2, 3).bfloat16(),
                               torch.tensor(2.5)],
                         ids=["float32", "int64", "float64", "bool", "bfloat16", "0-dim"])
def test_hash_tensor_is_cpus(x, dim, keepdim):
    """The XOR of the elements' 64 bits (float64 bits of a floating element,
    int64 of an integer one), any reduced dimensions (a 0-dim tensor's 0 and
    -1 are itself)."""
    if x.dim() == 0 and dim == [0, 1]:
        pytest.skip("a 0-dim tensor has no dimension 1 (CPU and the meta function raise)")
    expected = aten.hash_tensor.default(x, dim, keepdim=keepdim)
    _assert_cpus(_run("aten::hash_tensor", x, dim, keepdim=keepdim), expected)


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 3.5, math.inf])
@pytest.mark.parametrize("shapes", [((2, 5, 4), (2, 7, 4)), ((3, 1, 5, 4), (2, 6, 4)), ((30, 3), (4, 3)),
                                    ((3, 0), (2, 0))], ids=["batched", "broadcast", "over_25_rows", "no_columns"])
def test_cdist_matches_cpu(shapes, p):
    """Every p's map and reduction, batches broadcast, and the Euclidean
    distance through matrix products where CPU takes it (more than 25 rows).
    Only the order of the sums can differ from CPU's (p = 3.5)."""
    torch.manual_seed(0)
    x1, x2 = torch.randn(*shapes[0]), torch.randn(*shapes[1])
    expected = aten._cdist_forward.default(x1, x2, p, None)
    _assert_cpus(_run("aten::_cdist_forward", x1, x2, p, None), expected, exact=p in (0.0, 1.0, math.inf))


@pytest.mark.parametrize("p", [0.0, 1.0, 2.0, 0.5, math.inf])
@pytest.mark.parametrize("rows", [6, 1])
def test_pdist_matches_cpu(rows, p):
    """Exact where no sum's order or rounding can differ (p = 0, 1, inf),
    as for cdist. For p = 2, CPU's kernel is bit-identical to the
    decomposition on some machines and not on others: on an AVX2-only AMD
    EPYC, the decomposition run on CPU tensors differed from CPU's own
    _pdist_forward in 186 of 200 seeds (by an ulp), and infini's result
    equalled that CPU run of the decomposition in all 200."""
    x = torch.randn(rows, 3)
    _assert_cpus(_run("aten::_pdist_forward", x, p), aten._pdist_forward.default(x, p),
                 exact=p in (0.0, 1.0, math.inf))


@pytest.mark.parametrize("layout", ["contiguous", "4d", "channels_last_3d"])
def test_adaptive_avg_pool3d_and_its_gradient_are_cpus(layout):
    """Served as InfiniOps' ``adaptive_avg_pool3d.out`` and
    ``adaptive_avg_pool3d_backward.grad_input``, whose ATen kernels are
    CPU's: bit for bit, laid out as CPU lays them out."""
    x = {"contiguous": torch.randn(2, 3, 4, 5, 6), "4d": torch.randn(3, 4, 5, 6),
         "channels_last_3d": torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)}[layout]
    expected = aten._adaptive_avg_pool3d.default(x, [2, 3, 2])
    _assert_cpus(_run("aten::_adaptive_avg_pool3d", x, [2, 3, 2]), expected)
    grad = torch.randn_like(expected)
    _assert_cpus(_run("aten::_adaptive_avg_pool3d_backward", grad, x),
                 aten._adaptive_avg_pool3d_backward.default(grad, x))


@pytest.mark.parametrize("p", [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, math.inf])
@pytest.mark.parametrize("shapes", [((5, 4), (6, 4)), ((2, 5, 4), (2, 6, 4)), ((3, 1, 5, 4), (2, 6, 4))],
                         ids=["matrices", "batched", "broadcast"])
def test_distance_gradients_match_cpu(shapes, p):
    """``_cdist_backward`` (of the broadcast batch's shape, as CPU's) and
    ``_pdist_backward``, with pairs at distance zero (a repeated row): zero
    there, as CPU's."""
    torch.manual_seed(0)
    x1, x2 = torch.randn(*shapes[0]), torch.randn(*shapes[1])
    if shapes[0][:-2] == shapes[1][:-2]:
        x2[..., 0, :] = x1[..., 0, :]
    dist = aten._cdist_forward.default(x1, x2, p, None)
    grad = torch.randn_like(dist)
    _assert_cpus(_run("aten::_cdist_backward", grad, x1, x2, p, dist),
                 aten._cdist_backward.default(grad, x1, x2, p, dist), exact=p in (0.0, 1.0, 2.0, math.inf))
    x = torch.randn(6, 3)
    x[3] = x[1]
    dist = aten._pdist_forward.default(x, p)
    grad = torch.randn_like(dist)
    _assert_cpus(_run("aten::_pdist_backward", grad, x, p, dist), aten._pdist_backward.default(grad, x, p, dist),
                 exact=False)
