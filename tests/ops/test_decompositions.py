"""PyTorch's decompositions, for the overloads a provider does not map (torch_infini.decompositions).

On the Infini stack an operator InfiniOps lacks runs as the operators
PyTorch decomposes it into. The host runtime has a kernel for every
overload, so these tests drive the kernels' decomposition hook directly
(``_C._decompose_for_test``): the same hook, argument conversion, recursion
guard and refusal the stack's kernel uses, checked against CPU's kernels.
"""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_infini
from torch_infini import _C, decompositions
from infini_testing import DEV, on_host


def _decompose(overload: torch._ops.OpOverload, *args, **kwargs):
    schema = overload._schema
    return _C._decompose_for_test(schema.name, schema.overload_name, *args, **kwargs)


def _run(name: str, *args, **kwargs):
    """The runner itself, as the kernel calls it with a Python number (which
    the test hook cannot pass): its result, or the refusal it raises."""
    try:
        return decompositions.run(name, args, kwargs)
    except NotImplementedError as refusal:
        return str(refusal)


def _skip_if_unserved(got) -> None:
    """On the Infini stack, a decomposition that calls an operator InfiniOps
    does not serve is refused: what the test checks needs that operator."""
    if isinstance(got, str) and not on_host() and "InfiniOps" in got:
        pytest.skip(f"an operator the decomposition calls is unserved on this InfiniOps build: {got}")


def _on_device(value):
    return value.to(DEV) if isinstance(value, torch.Tensor) else value


def _tensors(value):
    return list(value) if isinstance(value, (tuple, list)) else [value]


aten = torch.ops.aten
X = torch.randn(2, 6, 4, 4)
CASES = {
    "native_layer_norm": (aten.native_layer_norm.default, (torch.randn(3, 8), [8], torch.randn(8), torch.randn(8), 1e-5), {}),
    "native_group_norm": (aten.native_group_norm.default, (X, torch.randn(6), torch.randn(6), 2, 6, 16, 3, 1e-5), {}),
    "trace": (aten.trace.default, (torch.randn(5, 5),), {}),
    "flip": (aten.flip.default, (X, [0, 2]), {}),
    "roll": (aten.roll.default, (X, [1, -2], [1, 3]), {}),
    "flip_negative_and_unit_dims": (aten.flip.default, (torch.randn(3, 1, 5), [-1, 1]), {}),
    "roll_flattened": (aten.roll.default, (X, [-37]), {}),
    "roll_empty_dim": (aten.roll.default, (torch.randn(0, 3), [2], [0]), {}),
    "sub": (aten.sub.Tensor, (X, torch.randn(6, 1, 1)), {"alpha": 3}),
    "sub_integers": (aten.sub.Tensor, (torch.arange(6), torch.arange(6).flip(0)), {"alpha": 2}),
    "rsub": (aten.rsub.Tensor, (torch.randn(5), torch.randn(5)), {"alpha": 0.5}),
    "var_mean": (aten.var_mean.correction, (X, [1, 2]), {"correction": 0, "keepdim": True}),
    "var_mean_of_all": (aten.var_mean.correction, (X,), {}),
    "var_mean_complex": (aten.var_mean.correction, (torch.randn(4, 5, dtype=torch.complex64), [1]), {"correction": 2}),
    "pixel_shuffle": (aten.pixel_shuffle.default, (torch.randn(1, 8, 3, 3), 2), {}),
    "hardswish_backward": (aten.hardswish_backward.default, (torch.randn(7), torch.randn(7) * 4), {}),
    "adaptive_avg_pool2d": (aten._adaptive_avg_pool2d.default, (X, [2, 2]), {}),
    "linspace": (aten.linspace.default, (-1.0, 2.0, 7), {"device": "DEV"}),
    "nonzero": (aten.nonzero.default, (torch.randn(4, 5, 3) > 0,), {}),
    "nonzero_integers": (aten.nonzero.default, (torch.randint(0, 3, (7,)),), {}),
    "nonzero_of_zeros": (aten.nonzero.default, (torch.zeros(3, 4),), {}),
    "nonzero_0dim": (aten.nonzero.default, (torch.tensor(2.0),), {}),
    "index_by_mask": (aten.index.Tensor, (X, [None, X[0, :, :, 0] > 0]), {}),
    "index_by_masks_and_indices": (aten.index.Tensor, (X, [torch.tensor([1]), X[0, :, 0, 0] > 0]), {}),
    "masked_select": (aten.masked_select.default, (torch.randn(3, 4), torch.randn(4) > 0), {}),
    "masked_scatter": (aten.masked_scatter.default, (torch.randn(3, 4), torch.randn(4) > 0, torch.randn(13)), {}),
    "masked_scatter_empty": (aten.masked_scatter.default, (torch.randn(0, 4), torch.randn(4) > 0, torch.randn(2)), {}),
    "unique": (aten._unique2.default, (torch.tensor([3, 1, 2, 1, 7, 5, 5, 0]), True, True, True), {}),
    "unique_floats_unsorted": (aten._unique2.default, (torch.randint(0, 4, (3, 5)).float(), False, True, True), {}),
    "unique_values_only": (aten._unique2.default, (torch.randint(0, 4, (9,)),), {}),
    "unique_consecutive": (aten.unique_consecutive.default, (torch.tensor([[3, 3], [1, 1], [2, 3]]), True, True), {}),
    "adaptive_avg_pool2d_backward": (aten._adaptive_avg_pool2d_backward.default,
                                     (torch.randn(2, 3, 3, 4), torch.randn(2, 3, 7, 9)), {}),
    "adaptive_avg_pool2d_backward_overlapping": (aten._adaptive_avg_pool2d_backward.default,
                                                 (torch.randn(2, 7, 6), torch.randn(2, 5, 5)), {}),
    "put": (aten.put.default, (torch.randn(2, 3), torch.tensor([0, -1, 4]), torch.randn(3)), {}),
    "put_accumulate": (aten.put.default, (torch.randn(2, 3), torch.tensor([[1, 1], [5, -6]]), torch.randn(2, 2), True),
                       {}),
    # Each degree of CPU's Taylor polynomials (norms from 1e-8 to 5, scaled
    # and squared above 1.46), in one batch; and float64's thresholds.
    "matrix_exp_every_degree": (aten.linalg_matrix_exp.default,
                                (torch.stack([torch.randn(3, 3) * s for s in (1e-8, 1e-4, 0.01, 0.1, 0.4, 5.0)]),), {}),
    "matrix_exp_float64": (aten.linalg_matrix_exp.default,
                           (torch.stack([torch.randn(4, 4) * s for s in (1e-17, 1e-9, 1e-5, 0.01, 0.07, 2.0)]).double(),),
                           {}),
    "matrix_exp_1x1": (aten.linalg_matrix_exp.default, (torch.randn(2, 1, 1),), {}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_decomposition_on_the_device_matches_cpu(case):
    overload, args, kwargs = CASES[case]
    expected = overload(*args, **{k: ("cpu" if v == "DEV" else v) for k, v in kwargs.items()})
    got = _decompose(overload, *[_on_device(a) for a in args],
                     **{k: (torch.device(DEV) if v == "DEV" else v) for k, v in kwargs.items()})
    _skip_if_unserved(got)
    assert not isinstance(got, str), f"refused: {got}"
    for g, e in zip(_tensors(got), _tensors(expected), strict=True):
        assert g.device.type == "infini"
        assert (g.dtype, g.shape) == (e.dtype, e.shape)
        torch.testing.assert_close(g.cpu(), e)


@pytest.mark.parametrize("overload,args", [(aten.flip.out, (X, [0, -1])), (aten.roll.out, (X, [3], [2])),
                                           (aten.all.out, (X > 0, 1)), (aten.any.dims_out, (X > 0, [0, 2]))],
                         ids=["flip", "roll", "all", "any"])
def test_own_out_overloads_write_out(overload, args):
    """flip and roll are ours (PyTorch's end in prims.rev, which is flip),
    as are all and any: their out= overloads resize and write ``out``, as
    CPU's do."""
    like = args[0].new_empty(0)
    expected = overload(*args, out=like)
    out = like.to(DEV)
    got = _decompose(overload, *[_on_device(a) for a in args], out=out)
    _skip_if_unserved(got)
    assert got.data_ptr() == out.data_ptr() and out.shape == expected.shape
    torch.testing.assert_close(out.cpu(), expected)


_DIVISIONS = {
    "float32": (torch.randn(64, 3), torch.randn(3)),
    "specials": (torch.tensor([0.0, -0.0, 1.0, -1.0, float("inf"), float("nan"), 1e-40, 3e38]),
                 torch.tensor([-0.0, 0.0, 0.0, -3.0, float("inf"), 2.0, 3.0, 1e-3])),
    "bfloat16": (torch.randn(50).bfloat16(), torch.randn(50).bfloat16()),
    "float16_by_float32": (torch.randn(50).half(), torch.randn(50)),
    "integers": (torch.arange(-6, 6), torch.tensor([3, -2, 5, 7, 1, -1, 4, 9, 2, 8, 6, -5])),
    "by_a_scalar": (torch.randn(20), torch.tensor(3.0)),
    "by_a_number": (torch.randn(20), 0.1),
    "integers_by_a_number": (torch.arange(10), 4),
    # CPU divides bfloat16 by a scalar's original value in float32 (not by the
    # scalar rounded to bfloat16, as addcdiv's own operands would be).
    "bfloat16_by_a_number": (torch.randn(2000).bfloat16(), 0.1),
    "float16_by_a_float32_scalar": (torch.randn(2000).half(), torch.tensor(0.1)),
    "bfloat16_by_a_float64_scalar": (torch.randn(2000).bfloat16(), torch.tensor(0.3, dtype=torch.float64)),
    "a_number_by_a_tensor": (0.1, torch.randn(50)),
    "a_number_by_bfloat16": (0.1, torch.randn(50).bfloat16()),
}


@pytest.mark.parametrize("case", sorted(_DIVISIONS))
def test_div_is_cpus_quotient_bit_for_bit(case):
    """Ours, as addcdiv(-0.0, x, other): each element CPU's quotient, signs of
    zeros and NaNs included."""
    x, other = _DIVISIONS[case]
    expected = torch.div(x, other)
    if isinstance(x, torch.Tensor) and isinstance(other, torch.Tensor):
        got = _decompose(aten.div.Tensor, x.to(DEV), other.to(DEV) if other.dim() else other)
    else:  # a Python number (x / 0.1, 1 / x) reaches the runner as the number
        got = _run("aten::div.Tensor", *(_on_device(v) for v in (x, other)))
    _skip_if_unserved(got)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    got = got.cpu()
    assert torch.equal(got.isnan(), expected.isnan())
    assert torch.equal(got[~got.isnan()], expected[~expected.isnan()])
    assert torch.equal(got.signbit(), expected.signbit())


_INDEX_PUTS = {
    "rows": ([torch.tensor([2, 0, -1])], torch.randn(3, 4, 5)),
    "mask": ([torch.tensor([True, False, True])], torch.randn(4, 5)),
    "broadcast_pair": ([torch.tensor([[0], [2]]), torch.tensor([1, 3])], torch.randn(5)),
    "slice_then_index": ([None, torch.tensor([3, 1])], torch.randn(1, 5)),
    "apart": ([torch.tensor([0, 1]), None, torch.tensor([4, 2])], torch.randn(2, 4)),
    "nothing": ([torch.tensor([], dtype=torch.long)], torch.randn(0, 4, 5)),
}


@pytest.mark.parametrize("x,other", [(1.5, torch.arange(4)), (2, torch.randn(4)), (torch.randn(4), 3)],
                         ids=["number_minus_integers", "integer_minus_floats", "floats_minus_a_number"])
def test_sub_with_a_number_matches_cpu(x, other):
    """A Python number reaches the runner as the number (1 - x)."""
    expected = torch.sub(x, other) if isinstance(x, torch.Tensor) else torch.rsub(other, x)
    got = _run("aten::sub.Tensor", _on_device(x), _on_device(other))
    _skip_if_unserved(got)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    assert torch.equal(got.cpu(), expected)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("case", sorted(_INDEX_PUTS))
def test_index_put_matches_cpu(case, accumulate):
    """Ours (PyTorch's runs index_put_ on a copy, which comes back to it):
    index of an arange gives the positions, index_copy or index_add writes."""
    indices, values = _INDEX_PUTS[case]
    x = torch.randn(3, 4, 5)
    if accumulate and case == "rows":  # repeated positions accumulate
        indices = [torch.tensor([2, 0, 2, -1])]
        values = torch.randn(4, 4, 5)
    expected = aten.index_put.default(x, indices, values, accumulate)
    got = _decompose(aten.index_put.default, x.to(DEV), [_on_device(i) for i in indices], values.to(DEV),
                     accumulate)
    _skip_if_unserved(got)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    torch.testing.assert_close(got.cpu(), expected)


def test_index_put_raises_cpus_error_for_an_index_out_of_range():
    with pytest.raises(IndexError) as cpu:
        torch.zeros(3).index_put_([torch.tensor([3])], torch.ones(1))
    with pytest.raises(IndexError) as infini:
        _skip_if_unserved(_decompose(aten.index_put.default, torch.zeros(3, device=DEV),
                                     [torch.tensor([3], device=DEV)], torch.ones(1, device=DEV)))
    assert str(infini.value) == str(cpu.value)


def test_an_in_place_overload_runs_as_its_functional_one_then_writes_self():
    """index_put_ (x[i] = v) and the other in-place overloads: their
    functional overload computes the result whole, then it is copied into
    self, which a failure part-way has not touched."""
    x, index, values = torch.randn(4, 3), torch.tensor([3, 1]), torch.randn(2, 3)
    on_device = x.to(DEV)
    got = _decompose(aten.index_put_.default, on_device, [index.to(DEV)], values.to(DEV))
    _skip_if_unserved(got)
    assert got.data_ptr() == on_device.data_ptr()
    torch.testing.assert_close(on_device.cpu(), x.clone().index_put_([index], values))
    # What index_put_ itself calls (x[i] = v reaches it): its functional twin is ours too.
    again = x.to(DEV)
    got = _decompose(aten._index_put_impl_.default, again, [index.to(DEV)], values.to(DEV), True, False)
    _skip_if_unserved(got)
    torch.testing.assert_close(again.cpu(), x.clone().index_put_([index], values, accumulate=True))
    before = on_device.cpu()
    with pytest.raises(IndexError):
        _decompose(aten.index_put_.default, on_device, [torch.tensor([7], device=DEV)], values[:1].to(DEV))
    assert torch.equal(on_device.cpu(), before)
    assert _decompose(aten.relu_.default, on_device) is not None  # relu: a functional twin
    torch.testing.assert_close(on_device.cpu(), before.relu())


_RANGES = [(0, 10, 1), (-3, 7.5, 0.5), (5, -5, -3), (0, 1, 0.1), (2, 2, 1)]
_DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32]


# An integer out with a step below 1 never reaches the operator: torch.arange's
# Python binding raises "step must be nonzero" first.
@pytest.mark.parametrize("dtype,start,end,step", [(d, *r) for d in _DTYPES for r in _RANGES
                                                  if d.is_floating_point or int(r[2]) != 0])
def test_arange_out_matches_cpu(dtype, start, end, step):
    """Ours: PyTorch's ends in prims.iota, which torch.arange implements."""
    with warnings.catch_warnings(record=True) as cpu_warnings:
        warnings.simplefilter("always")
        expected = torch.arange(start, end, step, out=torch.empty(3, dtype=dtype))
    out = torch.empty(3, dtype=dtype, device=DEV)
    with warnings.catch_warnings(record=True) as infini_warnings:
        warnings.simplefilter("always")
        got = _decompose(aten.arange.start_out, start, end, step, out=out)
    _skip_if_unserved(got)
    assert [str(w.message) for w in infini_warnings] == [str(w.message).split(" (Triggered internally")[0]
                                                         for w in cpu_warnings]
    assert got is out or got.data_ptr() == out.data_ptr()
    assert (out.dtype, out.shape) == (expected.dtype, expected.shape)
    torch.testing.assert_close(out.cpu(), expected)


@pytest.mark.parametrize("dtype,start,end,step", [(torch.int64, 2**60, 2**60 + 7, 2), (torch.int64, -(2**62), -(2**62) + 9, 3),
                                                  (torch.int32, 2**40, 2**40 + 5, 1), (torch.int8, 100, 160, 7)])
def test_arange_out_of_integers_is_exact_beyond_float64(dtype, start, end, step):
    """An integer arange is computed in int64, as CPU's kernel computes it:
    exact beyond 2^53, wrapped into a narrower dtype as CPU casts."""
    expected = torch.arange(start, end, step, out=torch.empty(0, dtype=dtype))
    out = torch.empty(0, dtype=dtype, device=DEV)
    got = _decompose(aten.arange.start_out, start, end, step, out=out)
    _skip_if_unserved(got)
    assert out.dtype == expected.dtype and torch.equal(out.cpu(), expected)


@pytest.mark.parametrize("start,end,step", [(0, 10, 0), (0, 10, -1), (0, float("inf"), 1)])
def test_arange_out_raises_cpus_errors(start, end, step):
    with pytest.raises(Exception) as cpu:
        torch.arange(start, end, step, out=torch.empty(0))
    with pytest.raises(type(cpu.value)) as infini:
        _decompose(aten.arange.start_out, start, end, step, out=torch.empty(0, device=DEV))
    assert str(infini.value) == str(cpu.value)


def test_an_overload_without_decomposition_is_not_run():
    a = torch.randn(2, 2, device=DEV)
    assert _decompose(aten.mm.default, a, a) == ""


def test_a_decomposition_that_leaves_the_device_is_refused(monkeypatch):
    table = dict(decompositions.decomposition_table())
    table["aten::trace"] = lambda x: torch.trace(x.cpu())
    monkeypatch.setattr(decompositions, "_table", table)
    got = _decompose(aten.trace.default, torch.randn(3, 3, device=DEV))
    assert isinstance(got, str) and "not on infini" in got


def test_a_decomposition_calling_itself_is_refused_not_recursed(monkeypatch):
    inner = []

    def calls_itself(x):
        inner.append(_decompose(aten.trace.default, x))  # the guard refuses the nested run
        return torch.diagonal(x).sum()

    table = dict(decompositions.decomposition_table())
    table["aten::trace"] = calls_itself
    monkeypatch.setattr(decompositions, "_table", table)
    x = torch.randn(3, 3)
    got = _decompose(aten.trace.default, x.to(DEV))
    assert inner == [""]
    _skip_if_unserved(got)
    torch.testing.assert_close(got.cpu(), torch.trace(x))


def test_a_decompositions_error_keeps_its_python_type(monkeypatch):
    def raises(x):
        raise IndexError("from the decomposition")

    table = dict(decompositions.decomposition_table())
    table["aten::trace"] = raises
    monkeypatch.setattr(decompositions, "_table", table)
    with pytest.raises(IndexError, match="from the decomposition"):
        _decompose(aten.trace.default, torch.randn(3, 3, device=DEV))


def test_the_table_holds_no_in_place_or_random_overload():
    table = decompositions.decomposition_table()
    assert "aten::native_layer_norm" in table and "aten::arange.start_out" in table
    for name in table:
        overload = name.split("::")[1].split(".")[0]
        assert not overload.endswith("_") or overload.startswith("_"), name


def test_the_runner_is_installed_at_import():
    assert torch_infini.decompositions.run is decompositions.run
    x = torch.randn(4, 4, device=DEV)
    got = _decompose(aten.trace.default, x)
    _skip_if_unserved(got)
    torch.testing.assert_close(got.cpu(), torch.trace(x.cpu()))


def _decompose_as_kernel(overload: torch._ops.OpOverload, *args, **kwargs):
    """The decomposition as the stack's generic kernel runs it for an
    overload InfiniOps does not serve: results laid out as CPU lays them out."""
    schema = overload._schema
    return _C._decompose_as_kernel_for_test(schema.name, schema.overload_name, *args, **kwargs)


def test_as_the_kernel_runs_it_a_result_takes_cpus_layout(monkeypatch):
    """A decomposition may return other strides than CPU's kernel: the
    kernel copies such a result into the layout of the meta run."""
    table = dict(decompositions.decomposition_table())
    table["aten::tril"] = lambda x, diagonal=0: torch.tril(x, diagonal).t().contiguous().t()  # column-major
    monkeypatch.setattr(decompositions, "_table", table)
    x = torch.randn(6, 4)
    expected = torch.tril(x, 1)
    assert expected.stride() == (4, 1)
    got = _decompose_as_kernel(aten.tril.default, x.to(DEV), 1)
    _skip_if_unserved(got)
    assert (got.shape, got.stride()) == (expected.shape, expected.stride())
    assert torch.equal(got.cpu(), expected)
    own = _decompose(aten.tril.default, x.to(DEV), 1)  # the decomposition's own layout
    assert isinstance(own, str) or own.stride() == (1, 6)


def _index_fill_by_cat(x, dim, index, value):
    """index_fill as a cat of x's slices and the value expanded over the
    filled ones (operators the Infini stack serves without ATen). cat takes
    no CPU tensor beside device ones, as CUDA's does not."""
    filled = set(index.cpu().tolist())
    parts = [value.to(x.dtype).expand(x.narrow(dim, i, 1).shape) if i in filled else x.narrow(dim, i, 1)
             for i in range(x.shape[dim])]
    return torch.cat(parts, dim)


@pytest.mark.parametrize("value", [torch.tensor(-2.5), torch.tensor(7, dtype=torch.int64)], ids=["float", "int"])
def test_as_the_kernel_runs_it_a_cpu_scalar_reaches_the_decomposition_on_the_device(monkeypatch, value):
    """CUDA's index_fill takes a CPU 0-dim value beside device tensors (a
    scalar); the operators its decomposition calls may not (PyTorch's passes
    it to index_copy as its source, ours here to cat): the kernel hands the
    decomposition such scalars on the call's device, and it computes CPU's
    values, not a device mismatch."""
    table = dict(decompositions.decomposition_table())
    table["aten::index_fill.int_Tensor"] = _index_fill_by_cat
    monkeypatch.setattr(decompositions, "_table", table)
    x, index = torch.randn(3, 5), torch.tensor([0, 3])
    expected = x.index_fill(1, index, value)
    got = _decompose_as_kernel(aten.index_fill.int_Tensor, x.to(DEV), 1, index.to(DEV), value)
    _skip_if_unserved(got)
    assert value.device.type == "cpu"  # given as it was: the move was the kernel's
    assert got.device.type == "infini" and torch.equal(got.cpu(), expected)


def test_as_the_kernel_runs_it_a_cpu_scalar_reaches_the_device_without_a_wait(monkeypatch):
    """CUDA passes a CPU scalar to its kernel as an argument: the host does
    not wait on a copy for it. Under torch.infini's sync debug mode, the
    kernel's steps up to the decomposition (the scalar's move among them)
    report no wait; the decomposition ends the mode first, as the operators
    it calls are not the subject (they may wait on the host runtime). It
    fills column 0 alone, as index_fill with the index [0]."""
    was = torch.infini.get_sync_debug_mode()

    def fill_column_0(x, dim, index, value):
        torch.infini.set_sync_debug_mode(was)
        return torch.cat([value.to(x.dtype).expand(x.narrow(dim, 0, 1).shape), x.narrow(dim, 1, x.shape[dim] - 1)],
                         dim)

    table = dict(decompositions.decomposition_table())
    table["aten::index_fill.int_Tensor"] = fill_column_0
    monkeypatch.setattr(decompositions, "_table", table)
    x, index, value = torch.randn(3, 5), torch.tensor([0]), torch.tensor(0.75)
    device_x, device_index = x.to(DEV), index.to(DEV)
    torch.infini.synchronize()
    torch.infini.set_sync_debug_mode("error")
    try:
        got = _decompose_as_kernel(aten.index_fill.int_Tensor, device_x, 1, device_index, value)
    finally:
        torch.infini.set_sync_debug_mode(was)
    _skip_if_unserved(got)
    assert torch.equal(got.cpu(), x.index_fill(1, index, value))


def test_as_the_kernel_runs_it_a_result_in_less_precision_than_cpus_is_refused():
    """PyTorch's native_group_norm decomposition computes a bfloat16 input's
    statistics in bfloat16; CPU's kernel returns them in float32 where the
    parameters are float32. Widened, they would not be CPU's values: the
    kernel refuses the decomposition, naming both dtypes."""
    x = torch.randn(2, 6, 4, 4).bfloat16()
    weight, bias = torch.randn(6), torch.randn(6)
    args = (x, weight, bias, 2, 6, 16, 3, 1e-5)
    assert [t.dtype for t in aten.native_group_norm.default(*args)] == [torch.bfloat16, torch.float32, torch.float32]
    try:
        got = _decompose_as_kernel(aten.native_group_norm.default, *[_on_device(a) for a in args])
    except NotImplementedError as refusal:
        assert "computes result 1 in BFloat16, where CPU returns Float" in str(refusal)
        assert "TORCH_INFINI_PROVIDER=host" in str(refusal)
    else:
        _skip_if_unserved(got)
        pytest.fail(f"ran where CPU's statistics are float32: {[t.dtype for t in got]}")



@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_as_the_kernel_runs_it_a_result_cpu_returns_empty_is_empty(dtype):
    """In eval mode CPU's native_batch_norm returns the saved mean and
    inverse deviation empty; PyTorch's decomposition returns one value per
    channel. The kernel returns CPU's empty results (their values have no
    counterpart), and the output as CPU computes it."""
    x = torch.randn(4, 3, 5).to(dtype)
    args = (x, torch.randn(3), torch.randn(3), torch.randn(3), torch.rand(3) + 0.5, False, 0.1, 1e-5)
    expected = aten.native_batch_norm.default(*args)
    assert [tuple(t.shape) for t in expected[1:]] == [(0,), (0,)]
    got = _decompose_as_kernel(aten.native_batch_norm.default, *[_on_device(a) for a in args])
    _skip_if_unserved(got)
    assert not isinstance(got, str), f"refused: {got}"
    assert [(t.dtype, tuple(t.shape)) for t in got] == [(t.dtype, tuple(t.shape)) for t in expected]
    torch.testing.assert_close(got[0].cpu(), expected[0])

_SCALAR_TWIN_CASES = [
    ("aten::eq.Scalar", torch.arange(-4, 4), 2),
    ("aten::ne.Scalar", torch.arange(6, dtype=torch.int32), 3),
    ("aten::lt.Scalar", torch.arange(6, dtype=torch.uint8), 4),
    ("aten::le.Scalar", torch.arange(-3, 3, dtype=torch.int16), -1),
    ("aten::gt.Scalar", torch.arange(6, dtype=torch.int8), 2),
    ("aten::ge.Scalar", torch.tensor([0, 2**40, -(2**40), 2**62]), 2**40),
    # CPU casts a Scalar its dtype does not hold as C++ does (wrapping).
    ("aten::eq.Scalar", torch.arange(3, dtype=torch.int32), 2**32 + 1),
    ("aten::lt.Scalar", torch.arange(250, 256, dtype=torch.uint8), -3),
    ("aten::add.Scalar", torch.arange(5, dtype=torch.int32), 7),
    ("aten::mul.Scalar", torch.arange(-3, 3), -9),
    ("aten::bitwise_and.Scalar", torch.arange(16), 5),
    ("aten::bitwise_or.Scalar", torch.arange(8, dtype=torch.uint8), 130),
    ("aten::bitwise_xor.Scalar", torch.arange(8, dtype=torch.int16), -2),
    ("aten::masked_fill.Scalar", torch.arange(6), None),
    # any() is sum(x).ne(False); a bool tensor compares as 0 and 1.
    ("aten::ne.Scalar", torch.arange(-2, 3), False),
    ("aten::ne.Scalar", torch.tensor([True, False, True]), False),
    ("aten::eq.Scalar", torch.tensor([True, False, True]), True),
    ("aten::lt.Scalar", torch.tensor([True, False]), 2**40),
    ("aten::ge.Scalar", torch.tensor([True, False]), -1),
    # Not an integer tensor and Scalar: PyTorch's decomposition, as before.
    ("aten::eq.Scalar", torch.tensor([0.5, 1.0, 2.0]), 1),
    ("aten::add.Scalar", torch.tensor([0.5, 1.0]), 0.25),
]


@pytest.mark.parametrize("name,x,scalar", _SCALAR_TWIN_CASES,
                         ids=[f"{c[0].split('::')[1]}-{c[1].dtype}-{c[2]}" for c in _SCALAR_TWIN_CASES])
def test_an_integer_scalar_runs_as_a_tensor_twin_matching_cpu(name, x, scalar):
    """InfiniOps takes a Scalar as a double: the stack refuses integer
    Scalars for integer tensors, and they run as the Tensor twin with the
    Scalar as a 0-dim tensor of the tensor's dtype, exactly as CPU computes."""
    packet, overload = name.split("::")[1].split(".")
    op = getattr(getattr(aten, packet), overload)
    args = (x, x % 2 == 0, 7) if packet == "masked_fill" else (x, scalar)
    expected = op(*args)
    got = _run(name, *(_on_device(a) for a in args))
    _skip_if_unserved(got)
    assert not isinstance(got, str), f"refused: {got}"
    assert got.device.type == "infini" and (got.dtype, got.shape) == (expected.dtype, expected.shape)
    assert torch.equal(got.cpu(), expected)


def test_an_out_scalar_overload_runs_as_its_tensor_twin():
    x = torch.arange(-5, 5)
    out = torch.empty(10, dtype=torch.bool, device=DEV)
    got = _run("aten::ge.Scalar_out", x.to(DEV), 3, out=out)
    _skip_if_unserved(got)
    assert got.data_ptr() == out.data_ptr()
    assert torch.equal(out.cpu(), x >= 3)


@pytest.mark.parametrize("x", [torch.randn(4, 5) > 0, torch.zeros(3, 4), torch.tensor(2.0), torch.tensor(0)],
                         ids=["mask", "none", "0dim", "0dim_zero"])
def test_nonzero_is_laid_out_as_cpus(x):
    """PyTorch has no meta function to lay nonzero out: ours gives CPU's
    column-major strides itself."""
    expected = torch.nonzero(x)
    got = _decompose(aten.nonzero.default, x.to(DEV))
    _skip_if_unserved(got)
    assert (got.shape, got.stride()) == (expected.shape, expected.stride())
    assert torch.equal(got.cpu(), expected)


def test_index_by_a_mask_of_another_shape_raises_cpus_error():
    x, mask = torch.randn(3, 4), torch.tensor([True, False])
    with pytest.raises(IndexError) as cpu:
        x[mask]
    with pytest.raises(IndexError) as infini:
        _skip_if_unserved(_decompose(aten.index.Tensor, x.to(DEV), [mask.to(DEV)]))
    assert str(infini.value) == str(cpu.value)


def test_grid_sampler_decomposes_in_float32_and_is_refused_in_bfloat16():
    """CPU's bfloat16 grid sampler rounds its coordinates in bfloat16, which
    PyTorch's decomposition does not: refused there rather than differ."""
    x, grid = torch.randn(1, 2, 5, 5), torch.rand(1, 4, 4, 2) * 2.2 - 1.1
    args = (0, 0, False)  # bilinear, zeros padding, align_corners
    expected = aten.grid_sampler_2d.default(x, grid, *args)
    got = _run("aten::grid_sampler_2d", x.to(DEV), grid.to(DEV), *args)
    _skip_if_unserved(got)
    torch.testing.assert_close(got.cpu(), expected)
    refused = _run("aten::grid_sampler_2d", x.bfloat16().to(DEV), grid.bfloat16().to(DEV), *args)
    assert isinstance(refused, str) and "bfloat16" in refused


_BOOL_RESULTS = torch.tensor([0.0, -0.0, float("nan"), -float("nan"), float("inf"), -float("inf"), -1.5, 2.0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64,
                                   torch.bool])
@pytest.mark.parametrize("name", ["signbit", "isposinf", "isneginf"])
def test_bool_only_results_decompose_bit_for_bit(name, dtype):
    """ATen writes these results as bool only, which InfiniOps cannot hold:
    ours compute them from the sign bit (read as a signed integer) and
    equality with infinity."""
    x = _BOOL_RESULTS.to(dtype) if dtype.is_floating_point else torch.tensor([-3, 0, 5]).to(dtype)
    expected = getattr(torch, name)(x)
    got = _run(f"aten::{name}", x.to(DEV))
    _skip_if_unserved(got)
    assert got.dtype == torch.bool and torch.equal(got.cpu(), expected)


def test_bitwise_not_of_bools_is_their_logical_not():
    x = torch.tensor([True, False, True])
    got = _run("aten::bitwise_not", x.to(DEV))
    _skip_if_unserved(got)
    assert torch.equal(got.cpu(), ~x)
    assert "bool tensors only" in _run("aten::bitwise_not", torch.arange(3).to(DEV))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("n", [0, 2, 3, 5, 9])
def test_polygamma_is_cpus_bit_for_bit(n, dtype):
    """digamma for n = 0; the zeta form with n! as CPU's kernel computes it
    (exp(lgamma(n + 1)) from the C library) for n >= 2."""
    x = torch.linspace(-5, 5, 301, dtype=dtype)
    expected = torch.polygamma(n, x)
    got = _run("aten::polygamma", n, x.to(DEV))
    _skip_if_unserved(got)
    got = got.cpu()
    assert torch.equal(got.isnan(), expected.isnan())
    assert torch.equal(got[~got.isnan()], expected[~expected.isnan()])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_trigamma_is_cpus_series(dtype):
    """n = 1 is CPU's own trigamma series, step for step: bit-equal from 0.5
    up; below, through the reflection, within a few ulps (ATen's sin is not
    the C library's, which CPU's kernel calls)."""
    x = torch.cat([torch.linspace(0.5, 60, 500, dtype=dtype), torch.linspace(-5, 0.49, 500, dtype=dtype)])
    expected = torch.polygamma(1, x)
    got = _run("aten::polygamma", 1, x.to(DEV))
    _skip_if_unserved(got)
    got = got.cpu()
    assert torch.equal(got[:500], expected[:500])
    torch.testing.assert_close(got, expected, equal_nan=True)


def test_polygamma_refuses_reduced_precision():
    assert "aten::polygamma" in _run("aten::polygamma", 2, torch.rand(4, dtype=torch.bfloat16).to(DEV))


@pytest.mark.parametrize("x", [torch.randn(4, 5), torch.tensor([3.0, float("nan"), 1.0]), torch.randint(0, 9, (7,)),
                               torch.tensor([])], ids=["floats", "nan", "integers", "empty"])
@pytest.mark.parametrize("name", ["median", "nanmedian"])
def test_median_of_all_elements_matches_cpu(name, x):
    expected = getattr(torch, name)(x)
    got = _run(f"aten::{name}", x.to(DEV))
    _skip_if_unserved(got)
    assert (got.dtype, got.shape) == (expected.dtype, expected.shape)
    assert torch.equal(got.cpu(), expected) or (got.isnan().item() and expected.isnan().item())


def test_var_mean_is_two_calls_and_raises_cpus_error_for_integers():
    x = torch.randn(2, 12, 32)
    for _ in range(2):  # the kernel's path: recorded, then replayed
        got = torch.var_mean(x.to(DEV), -1, correction=0, keepdim=True)
    for g, e in zip(got, torch.var_mean(x, -1, correction=0, keepdim=True), strict=True):
        torch.testing.assert_close(g.cpu(), e)
    if not on_host():
        programs = _C._decomposition_replayed_operators_of("aten::var_mean.correction")
        assert ["aten::var.correction", "aten::mean.dim"] in programs, programs
    with pytest.raises(RuntimeError) as cpu:
        torch.var_mean(torch.arange(3))
    with pytest.raises(RuntimeError) as infini:
        _run("aten::var_mean.correction", torch.arange(3).to(DEV))
    assert str(infini.value) == str(cpu.value)


def _layer_norm_args(shape, normalized, weight=True, bias=True, dtype=torch.float32, transposed=False):
    torch.manual_seed(0)
    x = torch.randn(*shape).to(dtype)
    x = x.t() if transposed else x
    w = torch.randn(*normalized).to(dtype) if weight else None
    b = torch.randn(*normalized).to(dtype) if bias else None
    return x, list(normalized), w, b


# Ours runs as batch norm's statistics of the rows and one addcmul (float32
# and float64, rows of two elements or more); the last two are PyTorch's.
# (PyTorch's keeps a reduced-precision input's statistics in float32, CPU in
# the input's dtype: the stack lays them out as CPU does, see
# test_meta_fixes.py.)
LAYER_NORM_CASES = {
    "weight_and_bias": _layer_norm_args((2, 12, 32), (32,)),
    "two_normalized_dims": _layer_norm_args((3, 4, 5), (4, 5)),
    "weight_only": _layer_norm_args((6, 7), (7,), bias=False),
    "bias_only": _layer_norm_args((6, 7), (7,), weight=False),
    "neither": _layer_norm_args((2, 3, 9), (9,), weight=False, bias=False),
    "float64": _layer_norm_args((5, 16), (16,), dtype=torch.float64),
    "transposed_input": _layer_norm_args((8, 6), (8,), transposed=True),
    "all_dims": _layer_norm_args((3, 4), (3, 4)),
    "one_element_rows": _layer_norm_args((4, 1), (1,)),
    "no_rows": _layer_norm_args((0, 5), (5,)),
}


@pytest.mark.parametrize("case", sorted(LAYER_NORM_CASES))
def test_layer_norm_matches_cpu(case):
    x, normalized, w, b = LAYER_NORM_CASES[case]
    expected = aten.native_layer_norm(x, normalized, w, b, 1e-5)
    got = _decompose(aten.native_layer_norm.default, *[_on_device(a) for a in (x, normalized, w, b)], 1e-5)
    _skip_if_unserved(got)
    for g, e in zip(got, expected, strict=True):
        assert (g.shape, g.dtype) == (e.shape, e.dtype)
        torch.testing.assert_close(g.cpu(), e)


def test_layer_norm_is_batch_norms_statistics_and_one_addcmul_where_the_provider_has_batch_norm():
    """Two calls where PyTorch's decomposition makes eight (a layer norm in
    every transformer block), where the provider has a batch norm kernel."""
    x, normalized, w, b = LAYER_NORM_CASES["weight_and_bias"]
    for _ in range(2):  # the kernel's path: recorded, then replayed
        got = torch.nn.functional.layer_norm(x.to(DEV), normalized, w.to(DEV), b.to(DEV))
    torch.testing.assert_close(got.cpu(), torch.nn.functional.layer_norm(x, normalized, w, b))
    if on_host():
        return  # CPU's own kernel: nothing decomposed
    programs = _C._decomposition_replayed_operators_of("aten::native_layer_norm")
    calls = [call for program in programs for call in program]
    if _C._provider_has_kernel("aten::_native_batch_norm_legit", "no_stats"):
        assert "aten::_native_batch_norm_legit.no_stats" in calls and "aten::addcmul" in calls, programs
    else:
        assert "aten::_native_batch_norm_legit.no_stats" not in calls, programs


@pytest.mark.parametrize("mask", [(True, True, True), (True, False, False), (False, True, True)],
                         ids=["all_grads", "input_only", "params_only"])
@pytest.mark.parametrize("case", sorted(LAYER_NORM_CASES))
def test_layer_norm_backward_matches_cpu(case, mask):
    """Ours (float32 and float64: the row means as sums scaled in the next
    call) and PyTorch's (no rows, reduced precision) against CPU's kernel."""
    x, normalized, w, b = LAYER_NORM_CASES[case]
    mask = [mask[0], mask[1] and w is not None, mask[2] and b is not None]  # as autograd asks
    _, mean, rstd = aten.native_layer_norm(x, normalized, w, b, 1e-5)
    grad = torch.randn(x.shape, dtype=x.dtype, generator=torch.Generator().manual_seed(1))
    expected = aten.native_layer_norm_backward(grad, x, normalized, mean, rstd, w, b, mask)
    got = _decompose(aten.native_layer_norm_backward.default,
                     *[_on_device(a) for a in (grad, x, normalized, mean, rstd, w, b)], mask)
    _skip_if_unserved(got)
    for g, e in zip(got, expected, strict=True):
        if e is None:
            assert g is None
            continue
        assert (g.shape, g.dtype) == (e.shape, e.dtype)
        torch.testing.assert_close(g.cpu(), e)


def _replayed_programs(name: str) -> list[list[str]]:
    """The operators each replayed program of ``name`` calls, views left out."""
    views = {"aten::reshape", "aten::view", "aten::detach", "aten::unsqueeze"}
    return [[call for call in program if call not in views]
            for program in _C._decomposition_replayed_operators_of(name)]


def test_layer_norm_backward_is_twelve_calls_where_the_provider_serves_them():
    """Fifteen calls in PyTorch's decomposition (two layer norms in every
    transformer block's backward)."""
    x, normalized, w, b = LAYER_NORM_CASES["weight_and_bias"]
    x, w, b = (t.to(DEV).requires_grad_() for t in (x, w, b))
    for _ in range(2):  # the kernel's path: recorded, then replayed
        torch.nn.functional.layer_norm(x, normalized, w, b).sum().backward()
    expected = [t.detach().requires_grad_() for t in (x.cpu(), w.cpu(), b.cpu())]
    torch.nn.functional.layer_norm(expected[0], normalized, *expected[1:]).sum().backward()
    for g, e in zip((x, w, b), expected, strict=True):
        torch.testing.assert_close(g.grad.cpu(), 2 * e.grad)
    if on_host():
        return  # CPU's own kernel: nothing decomposed
    programs = _replayed_programs("aten::native_layer_norm_backward")
    if decompositions.provider.serves("aten::sub.out", "aten::mul.out", "aten::addcmul.out", "aten::sum.IntList_out"):
        # Other tests in this process may have recorded other programs of it.
        assert [12, True] in [[len(p), "aten::addcmul" in p] for p in programs], programs


_REDUCTIONS = [((), {}), ((1,), {}), ((-1, True), {}), (((0, 2),), {}), (((0, 2), True), {}), (([],), {}),
               ((None,), {"keepdim": True})]


@pytest.mark.parametrize("dtype", [torch.bool, torch.float32, torch.int64, torch.uint8], ids=str)
@pytest.mark.parametrize("name", ["all", "any"])
def test_all_and_any_match_cpu_bit_for_bit(name, dtype):
    """One amin/amax of the bools (uint8, which CPU answers in uint8, no
    elements and dim=[] as PyTorch's reference): values, dtype, shape."""
    x = (torch.randn(3, 4, 5, generator=torch.Generator().manual_seed(0)) > 0.2).to(dtype)
    x[1, 2] = 0  # a row with no true element, for all; and one with some
    empty = torch.zeros(0, 3, dtype=dtype)
    for t, (args, kwargs) in [(x, form) for form in _REDUCTIONS] + [(empty, ((0,), {})), (empty, ((1,), {}))]:
        expected = getattr(torch, name)(t, *args, **kwargs)
        got = getattr(torch, name)(t.to(DEV), *args, **kwargs)
        assert (got.dtype, got.shape) == (expected.dtype, expected.shape), (args, kwargs)
        assert torch.equal(got.cpu(), expected), (args, kwargs)
    if not on_host() and dtype == torch.bool and decompositions.provider.serves("aten::amin.out", "aten::amax.out"):
        assert ["aten::amin" if name == "all" else "aten::amax"] in _replayed_programs(f"aten::{name}.dim")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64], ids=str)
def test_dropout_backward_is_cpus_bit_for_bit(dtype):
    """``grad * mask * scale`` as CPU's kernel rounds it (PyTorch's
    decomposition rounds ``grad * (mask * scale)``)."""
    gen = torch.Generator().manual_seed(0)
    grad, mask = torch.randn(6, 7, generator=gen).to(dtype), torch.rand(6, 7, generator=gen) > 0.3
    expected = aten.native_dropout_backward(grad, mask, 1 / 0.7)
    got = _decompose(aten.native_dropout_backward.default, grad.to(DEV), mask.to(DEV), 1 / 0.7)
    _skip_if_unserved(got)
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


def test_masked_scatter_raises_cpus_error_for_too_small_a_source():
    with pytest.raises(RuntimeError) as cpu:
        torch.zeros(5).masked_scatter(torch.ones(5, dtype=torch.bool), torch.ones(3))
    with pytest.raises(RuntimeError) as infini:
        _skip_if_unserved(_run("aten::masked_scatter", torch.zeros(5, device=DEV),
                               torch.ones(5, dtype=torch.bool, device=DEV), torch.ones(3, device=DEV)))
    assert str(infini.value) == str(cpu.value)


@pytest.mark.parametrize("x,other", [(torch.zeros(2, 3), torch.zeros(3, 2)), (torch.tensor([1.0, float("nan")]),) * 2,
                                     (torch.tensor([1.0, 2.0]), torch.tensor([1, 2])), (torch.zeros(0), torch.zeros(0))],
                         ids=["shapes", "nan", "dtypes", "empty"])
def test_equal_matches_cpu(x, other):
    got = _run("aten::equal", x.to(DEV), other.to(DEV))
    _skip_if_unserved(got)
    assert got is torch.equal(x, other)


def test_an_in_place_index_put_into_an_empty_tensor():
    """An empty result has a null address, as an empty self has: it is not a
    view of it."""
    x = torch.zeros(0, 3)
    index, values = [torch.tensor([], dtype=torch.long)], torch.zeros(0, 3)
    got = _decompose(aten.index_put_.default, x.to(DEV), [i.to(DEV) for i in index], values.to(DEV))
    _skip_if_unserved(got)
    assert not isinstance(got, str), got
    assert got.shape == x.clone().index_put_(index, values).shape


def test_a_refused_decomposition_is_remembered_for_its_own_arguments_only():
    """The kernel remembers a refusal so as not to try again, by the call's
    int arguments too: unique_consecutive over a dim is refused, over the
    flattened tensor not."""
    x = torch.tensor([1, 1, 2, 2, 1])
    assert "dim=None only" in _decompose_as_kernel(aten.unique_consecutive.default, x.to(DEV), False, False, 0)
    got = _decompose_as_kernel(aten.unique_consecutive.default, x.to(DEV), False, False, None)
    _skip_if_unserved(got)
    assert torch.equal(got[0].cpu(), torch.tensor([1, 2, 1]))


@pytest.mark.parametrize("base,exponent", [(2, torch.arange(5)), (2.5, torch.randn(6)),
                                           (10.0, torch.rand(3, dtype=torch.float64))],
                         ids=["integers", "float32", "float64"])
def test_a_number_to_a_tensors_powers_matches_cpu(base, exponent):
    expected = torch.pow(base, exponent)
    got = _run("aten::pow.Scalar", base, exponent.to(DEV))
    _skip_if_unserved(got)
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


def test_unique_counts_each_nan_apart_as_cpu():
    x = torch.tensor([3.0, float("nan"), 1.0, float("nan")])
    expected = torch._unique2(x, True, True, True)
    got = _decompose(aten._unique2.default, x.to(DEV), True, True, True)
    _skip_if_unserved(got)
    for g, e in zip(got, expected, strict=True):
        torch.testing.assert_close(g.cpu(), e, equal_nan=True)


def test_put_raises_cpus_error_for_an_index_out_of_range():
    with pytest.raises(IndexError) as cpu:
        torch.zeros(2, 3).put(torch.tensor([6]), torch.ones(1))
    with pytest.raises(IndexError) as infini:
        _skip_if_unserved(_decompose(aten.put.default, torch.zeros(2, 3, device=DEV), torch.tensor([6], device=DEV),
                                     torch.ones(1, device=DEV)))
    assert str(infini.value) == str(cpu.value)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32, torch.float64], ids=["bfloat16", "float32", "float64"])
@pytest.mark.parametrize("padding_idx", [-1, 2], ids=["no_padding", "padding"])
def test_embedding_backward_adds_in_order_in_its_dtype_as_cpu(padding_idx, dtype):
    """CPU adds each index's gradient row in the gradient's dtype, in order
    (PyTorch's decomposition adds bfloat16 in float32): bit-equal. float32
    and float64 as whole rows (one index_add along the rows)."""
    torch.manual_seed(0)
    grad, indices = (torch.randn(5, 10, 3) * 10).to(dtype), torch.randint(0, 4, (5, 10))
    expected = aten.embedding_dense_backward.default(grad, indices, 6, padding_idx, False)
    got = _decompose(aten.embedding_dense_backward.default, grad.to(DEV), indices.to(DEV), 6, padding_idx, False)
    _skip_if_unserved(got)
    assert got.dtype == expected.dtype and torch.equal(got.cpu(), expected)


def test_adaptive_avg_pool2d_backward_is_refused_in_bfloat16():
    """CPU divides and sums its gradient in bfloat16; ours multiplies by the
    windows' weights: refused there rather than differ."""
    got = _run("aten::_adaptive_avg_pool2d_backward", torch.randn(2, 3, 3).bfloat16().to(DEV),
               torch.randn(2, 7, 9).bfloat16().to(DEV))
    assert isinstance(got, str) and "bfloat16" in got


@pytest.mark.parametrize("view", ["diagonal", "column"])
def test_a_masked_write_into_a_strided_view_decomposes(view):
    """``x.diagonal()[mask] = v`` (OpInfo's own sample makers do it): ATen
    cannot tell whether a self that is not dense overlaps the other
    arguments, which live in other storages, so the in-place overload still
    runs as its functional one, then writes the view, as CPU's kernel does."""
    base = torch.randn(4, 4)
    take = {"diagonal": lambda t: t.diagonal(), "column": lambda t: t[:, 1]}[view]
    expected = base.clone()
    mask = take(expected).abs() < 0.7
    aten._index_put_impl_.default(take(expected), [mask], torch.tensor(5.0))
    got = base.to(DEV)
    result = _decompose_as_kernel(aten._index_put_impl_.default, take(got), [mask.to(DEV)], torch.tensor(5.0, device=DEV))
    _skip_if_unserved(result)
    assert not isinstance(result, str), f"refused: {result!r}"
    torch.testing.assert_close(got.cpu(), expected, rtol=0, atol=0)
