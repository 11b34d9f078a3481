"""aten::add.Tensor, add_.Tensor and add.out on infini against CPU PyTorch."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import torch_infini

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int64]

# What the selected provider declares for add (its support matrix), so that
# every provider is held to exactly what it claims.
ADD = next(r for r in torch_infini.operator_table() if r["op"] == "aten::add.Tensor")
ALPHA_SUPPORTED = ADD["alpha"]
HOST = torch_infini.diagnostics()["provider"] == "host"
IDS = [str(d).replace("torch.", "") for d in DTYPES]


def sample(shape, dtype, seed: int = 0) -> torch.Tensor:
    """Deterministic CPU values of ``dtype``, exactly representable in every float dtype."""
    n = 1
    for s in shape:
        n *= s
    base = (torch.arange(n, dtype=torch.int64) * 7 + seed * 13) % 41 - 20
    if dtype.is_floating_point:
        return (base.to(torch.float64) * 0.5).to(dtype).reshape(shape)
    return base.to(dtype).reshape(shape)


def dev(t: torch.Tensor) -> torch.Tensor:
    return t.to("infini")


def assert_matches(actual: torch.Tensor, expected: torch.Tensor) -> None:
    """Same values, dtype, shape and strides as the CPU result."""
    assert actual.device.type == "infini"
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


SHAPE_PAIRS = {
    "0d": ((), ()),
    "empty": ((0,), (0,)),
    "empty_2d": ((3, 0), (3, 0)),
    "one": ((1,), (1,)),
    "same_2d": ((3, 4), (3, 4)),
    "col_row": ((3, 1), (1, 4)),
    "trailing": ((2, 3, 4), (4,)),
    "0d_lhs": ((), (2, 3)),
    "0d_rhs": ((2, 3), ()),
    "one_vs_empty": ((1,), (0,)),
    "large": ((257, 33), (257, 33)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("pair", list(SHAPE_PAIRS), ids=list(SHAPE_PAIRS))
def test_add_tensor(pair, dtype):
    sa, sb = SHAPE_PAIRS[pair]
    a, b = sample(sa, dtype, 1), sample(sb, dtype, 2)
    assert_matches(torch.add(dev(a), dev(b)), torch.add(a, b))
    assert_matches(dev(a) + dev(b), a + b)


# Non-contiguous operands: name -> function of a (6, 8) tensor.
VIEWS = {
    "transposed": lambda t: t.t(),
    "step_slice": lambda t: t[::2, 1::3],
    "offset": lambda t: t[2:, 3:],
    "transposed_step": lambda t: t.t()[1:, ::2],
    "expanded": lambda t: t[:1].expand(6, 8),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("view", list(VIEWS), ids=list(VIEWS))
def test_add_strided_operands(view, dtype):
    f = VIEWS[view]
    a, b = sample((6, 8), dtype, 1), sample((6, 8), dtype, 2)
    # Both strided, and strided with contiguous.
    assert_matches(f(dev(a)) + f(dev(b)), f(a) + f(b))
    contig = sample(tuple(f(a).shape), dtype, 3)
    assert_matches(f(dev(a)) + dev(contig), f(a) + contig)
    assert_matches(dev(contig) + f(dev(b)), contig + f(b))


def test_transposed_plus_transposed_keeps_transposed_strides():
    a, b = sample((3, 5), torch.float32, 1), sample((3, 5), torch.float32, 2)
    out = dev(a).t() + dev(b).t()
    expected = a.t() + b.t()
    assert expected.stride() == (1, 5)
    assert_matches(out, expected)


def test_channels_last_output_layout_matches_cpu():
    a = sample((2, 3, 4, 5), torch.float32, 1).contiguous(memory_format=torch.channels_last)
    b = sample((2, 3, 4, 5), torch.float32, 2).contiguous(memory_format=torch.channels_last)
    assert_matches(dev(a) + dev(b), a + b)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_add_inplace(dtype):
    a, b = sample((3, 4), dtype, 1), sample((4,), dtype, 2)
    da = dev(a)
    ptr = da.data_ptr()
    returned = da.add_(dev(b))
    assert returned is da
    assert da.data_ptr() == ptr
    assert_matches(da, a.clone().add_(b))
    # Method and operator forms.
    da2 = dev(a)
    da2 += dev(a)
    assert_matches(da2, a + a)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_add_inplace_into_strided_view(dtype):
    base_cpu = sample((6, 8), dtype, 1)
    base = dev(base_cpu)
    other = sample((4, 3), dtype, 2)
    base.t()[2:6, ::2].add_(dev(other))
    expected = base_cpu.clone()
    expected.t()[2:6, ::2].add_(other)
    torch.testing.assert_close(base.cpu(), expected, rtol=0, atol=0)


def test_add_inplace_aliasing_self():
    a = sample((5,), torch.float32, 1)
    d = dev(a)
    d.add_(d)
    torch.testing.assert_close(d.cpu(), a + a, rtol=0, atol=0)


def test_inplace_broadcast_into_smaller_raises_like_cpu():
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape") as cpu_err:
        torch.zeros(4).add_(torch.ones(3, 4))
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape") as dev_err:
        dev(torch.zeros(4)).add_(dev(torch.ones(3, 4)))
    assert str(dev_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]


def test_inplace_into_internally_overlapping_raises_like_cpu():
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        dev(torch.zeros(1)).expand(3).add_(dev(torch.ones(3)))


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_add_out_same_shape(dtype):
    a, b = sample((3, 4), dtype, 1), sample((3, 4), dtype, 2)
    out = torch.empty(3, 4, dtype=dtype, device="infini")
    ptr = out.data_ptr()
    returned = torch.add(dev(a), dev(b), out=out)
    assert returned is out
    assert out.data_ptr() == ptr
    assert_matches(out, a + b)


def test_add_out_into_strided_out_keeps_its_strides():
    a, b = sample((3, 4), torch.float32, 1), sample((3, 4), torch.float32, 2)
    out = torch.empty(4, 3, device="infini").t()
    cpu_out = torch.empty(4, 3).t()
    torch.add(dev(a), dev(b), out=out)
    torch.add(a, b, out=cpu_out)
    assert_matches(out, cpu_out)


@pytest.mark.parametrize("start_shape", [(0,), (5,), (2, 2)], ids=["empty", "wrong_numel", "wrong_shape"])
@pytest.mark.parametrize("transposed", [False, True], ids=["contig_in", "transposed_in"])
def test_add_out_resizes_like_cpu(start_shape, transposed):
    a, b = sample((3, 4), torch.float32, 1), sample((3, 4), torch.float32, 2)
    if transposed:
        a, b = a.t(), b.t()
    out = torch.empty(start_shape, device="infini")
    cpu_out = torch.empty(start_shape)
    with warnings.catch_warnings(record=True) as dev_warn:
        warnings.simplefilter("always")
        torch.add(dev(a), dev(b), out=out)
    with warnings.catch_warnings(record=True) as cpu_warn:
        warnings.simplefilter("always")
        torch.add(a, b, out=cpu_out)
    assert_matches(out, cpu_out)
    # The deprecation warning for resizing a non-empty out= is the same.
    assert [str(w.message) for w in dev_warn] == [str(w.message) for w in cpu_warn]


def test_add_out_of_another_dtype_follows_cpu():
    """out= of a lower or higher float dtype receives the cast result, as on
    the CPU; an integer out= for float operands raises, as on the CPU."""
    a = sample((3,), torch.float32)
    for dtype in (torch.float16, torch.float64):
        out = torch.empty(3, dtype=dtype, device="infini")
        torch.add(dev(a), dev(a), out=out)
        assert torch.equal(out.cpu(), torch.add(a, a, out=torch.empty(3, dtype=dtype)))
    with pytest.raises(RuntimeError, match="cast|Long|Float"):
        torch.add(dev(a), dev(a), out=torch.empty(3, dtype=torch.int64, device="infini"))


def test_add_out_on_cpu_raises():
    a = dev(sample((3,), torch.float32))
    with pytest.raises(RuntimeError):
        torch.add(a, a, out=torch.empty(3))


def test_add_out_overlapping_input_raises_like_cpu():
    cpu = sample((6,), torch.float32)
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.add(cpu[:4], cpu[:4], out=cpu[1:5])
    d = dev(cpu)
    with pytest.raises(RuntimeError, match="single memory location"):
        torch.add(d[:4], d[:4], out=d[1:5])


# --- alpha ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
@pytest.mark.parametrize("alpha", [2.5, -0.5, 0.0, 3])
def test_alpha_on_float(dtype, alpha):
    a, b = sample((4, 5), dtype, 1), sample((4, 5), dtype, 2)
    if not ALPHA_SUPPORTED:
        with pytest.raises(NotImplementedError, match="aten::add.Tensor.*alpha"):
            torch.add(dev(a), dev(b), alpha=alpha)
        return
    assert_matches(torch.add(dev(a), dev(b), alpha=alpha), torch.add(a, b, alpha=alpha))
    da = dev(a)
    da.add_(dev(b), alpha=alpha)
    assert_matches(da, a.clone().add_(b, alpha=alpha))
    out = torch.empty(4, 5, dtype=dtype, device="infini")
    torch.add(dev(a), dev(b), alpha=alpha, out=out)
    assert_matches(out, torch.add(a, b, alpha=alpha))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.uint8], ids=str)
@pytest.mark.parametrize("alpha", [2, -3, 0])
def test_int_alpha_on_int(dtype, alpha):
    a, b = sample((4, 5), dtype, 1), sample((4, 5), dtype, 2)
    if dtype == torch.uint8:
        a, b = a.abs(), b.abs()
    if not ALPHA_SUPPORTED:
        with pytest.raises(NotImplementedError, match="aten::add.Tensor.*alpha"):
            torch.add(dev(a), dev(b), alpha=alpha)
        return
    assert_matches(torch.add(dev(a), dev(b), alpha=alpha), torch.add(a, b, alpha=alpha))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_float_alpha_on_int_raises_like_cpu(dtype):
    a = sample((3,), dtype)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point") as cpu_err:
        torch.add(a, a, alpha=0.5)
    with pytest.raises(RuntimeError, match="alpha must not be a floating point") as dev_err:
        torch.add(dev(a), dev(a), alpha=0.5)
    assert str(dev_err.value).splitlines()[0] == str(cpu_err.value).splitlines()[0]
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        dev(a).add_(dev(a), alpha=2.0)


def test_large_int64_alpha_is_exact():
    a = torch.tensor([1, 2], dtype=torch.int64)
    b = torch.tensor([1, 1], dtype=torch.int64)
    alpha = 2**53 + 1
    if not HOST:
        # InfiniOps takes alpha as a double: refused before the call, never rounded.
        with pytest.raises(NotImplementedError, match="aten::add.Tensor.*alpha"):
            torch.add(dev(a), dev(b), alpha=alpha)
        return
    torch.testing.assert_close(torch.add(dev(a), dev(b), alpha=alpha).cpu(), torch.add(a, b, alpha=alpha),
                               rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64], ids=str)
def test_rounding_matches_cpu(dtype):
    """Values that are not exactly representable: same rounding as the CPU kernel.

    The host runtime runs CPU kernels, so it must match bit for bit. InfiniOps
    rounds on its own (float16/bfloat16 conversion back from float, the
    order of ``a + alpha * b``): there, one unit in the last place of the
    operands is allowed, nothing more."""
    gen = torch.Generator().manual_seed(1234)
    a = torch.randn(2048, generator=gen).to(dtype)
    b = torch.randn(2048, generator=gen).to(dtype)
    da, db = dev(a), dev(b)
    ulp = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7, torch.float32: 2.0**-23, torch.float64: 2.0**-52}[dtype]
    magnitude = float(torch.maximum(a.abs().max(), b.abs().max()))

    def check(actual, expected):
        if HOST:
            assert_matches(actual, expected)
            return
        assert actual.dtype == expected.dtype and actual.stride() == expected.stride()
        torch.testing.assert_close(actual.cpu(), expected, rtol=ulp, atol=ulp * magnitude)

    check(da + db, a + b)
    if ALPHA_SUPPORTED:
        for alpha in (0.1, 1 / 3):
            check(torch.add(da, db, alpha=alpha), torch.add(a, b, alpha=alpha))
    for scalar in (0.1, 1 / 3, 1e5, 1e-8):
        check(da + scalar, a + scalar)
    check(da + torch.tensor(0.1, dtype=torch.float64), a + torch.tensor(0.1, dtype=torch.float64))


# --- Python scalars and CPU 0-d tensors ----------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("scalar", [1, 2.5, -0.25, 0])
def test_python_scalar_on_float(dtype, scalar):
    a = sample((3, 4), dtype, 1)
    assert_matches(dev(a) + scalar, a + scalar)
    assert_matches(scalar + dev(a), scalar + a)
    assert_matches(torch.add(dev(a), scalar), torch.add(a, scalar))
    da = dev(a)
    da += scalar
    assert_matches(da, a + scalar)


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
def test_int_scalar_on_int(dtype):
    a = sample((3, 4), dtype, 1)
    assert_matches(dev(a) + 7, a + 7)
    assert_matches(dev(a) + -3, a + -3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int8, torch.uint8], ids=str)
@pytest.mark.parametrize("scalar", [1e39, -1e39, 1e300, 70000.0, 300, -129, True])
def test_a_scalar_beyond_the_dtype_converts_as_on_cpu(dtype, scalar):
    """CPU's kernel converts a wrapped number into the tensor's dtype without
    a range check (float32 + 1e39 adds inf, uint8 + 300 adds 44), where
    at::scalar_tensor would refuse it; a float scalar on an integer tensor
    promotes. The result, or CPU's error, either way."""
    a = sample((5,), dtype, 1)
    for fn in (lambda x: x + scalar, lambda x: torch.add(x, scalar), lambda x: scalar + x):
        try:
            expected = fn(a)
        except RuntimeError as e:
            with pytest.raises(RuntimeError, match=re.escape(str(e).splitlines()[0])):
                fn(dev(a))
            continue
        assert_matches(fn(dev(a)), expected)


def test_cpu_zero_dim_tensor_is_a_scalar():
    a = sample((2, 3), torch.float32, 1)
    assert_matches(dev(a) + torch.tensor(2.5), a + torch.tensor(2.5))
    assert_matches(torch.tensor(2.5) + dev(a), torch.tensor(2.5) + a)
    assert_matches(dev(a) + torch.tensor(3), a + torch.tensor(3))


def test_scalar_used_twice_with_different_values():
    """Scalars are cached as device tensors: a new value must not reuse an old one."""
    a = sample((4,), torch.float32, 1)
    d = dev(a)
    results = [d + s for s in (1.0, 2.0, 1.0, 3.5)]
    for s, r in zip((1.0, 2.0, 1.0, 3.5), results):
        torch.testing.assert_close(r.cpu(), a + s, rtol=0, atol=0)


# --- errors --------------------------------------------------------------------


def test_mixed_dtypes_promote_like_cpu():
    """Operands of two dtypes (or a float scalar with an integer tensor)
    promote as on the CPU (and CUDA)."""
    from infini_testing import matches_cpu, unserved_skips

    f32, f16 = sample((3, 4), torch.float32), sample((3, 4), torch.float16, 1)
    i64 = sample((3, 4), torch.int64)
    matches_cpu(torch.add, f32, f16)
    matches_cpu(torch.add, i64, f32)
    matches_cpu(lambda a, b: torch.add(a, b, alpha=2), i64, f16)
    matches_cpu(lambda a: a + 2.5, i64)
    matches_cpu(lambda a: torch.tensor(0.5) + a, i64)
    matches_cpu(lambda a, b: a.clone().add_(b), f32, f16)       # in place: the result keeps self's dtype
    matches_cpu(lambda a, b: torch.add(a, b, out=torch.empty(0, dtype=torch.float64, device=a.device)), f32, f16)
    with pytest.raises(RuntimeError, match="cast|not possible"):   # CPU's rule for in-place
        unserved_skips(lambda: dev(i64).add_(dev(f32)))


def test_mixed_devices_raise():
    a = dev(sample((3,), torch.float32))
    with pytest.raises(RuntimeError, match="cpu") as info:
        a + torch.ones(3)
    assert "infini" in str(info.value)
    with pytest.raises(RuntimeError, match="cpu"):
        torch.ones(3) + a
    with pytest.raises(RuntimeError, match="cpu"):
        a.add_(torch.ones(3))


@pytest.mark.parametrize("dtype", [torch.bool, torch.complex64], ids=str)
def test_dtypes_beyond_adds_own_kernel(dtype):
    """bool and complex adds run as on the CPU where the provider runs CPU
    kernels; elsewhere they are refused naming the operator and dtype."""
    a = torch.tensor([True, False, True]) if dtype == torch.bool else torch.randn(3, dtype=dtype)
    supported = next(r for r in torch_infini.operator_table() if r["op"] == "aten::add.Tensor")["dtypes"]
    if str(dtype).removeprefix("torch.") in supported:
        torch.testing.assert_close((dev(a) + dev(a)).cpu(), a + a, rtol=0, atol=0)
        return
    with pytest.raises(NotImplementedError) as info:
        dev(a) + dev(a)
    message = str(info.value)
    assert "aten::add" in message and str(dtype).removeprefix("torch.") in message


@pytest.mark.parametrize("tensor_dtype,scalar", [
    (torch.bool, 1), (torch.bool, 2.5), (torch.int64, 2.5), (torch.float32, 1j), (torch.int32, True)],
    ids=["bool+int", "bool+float", "int+float", "float+complex", "int+bool"])
def test_a_scalar_of_a_higher_category_promotes_as_on_cpu(tensor_dtype, scalar):
    """A Python scalar of a higher category than the tensor's (PyTorch's
    type promotion) gives CPU's result dtype and values on every provider,
    or a refusal naming the dtype: never the tensor's dtype with the scalar
    converted into it (the stack returned bool for bool_tensor + 1)."""
    a = torch.tensor([True, False, True]).to(tensor_dtype)
    expected = a + scalar
    try:
        got = (dev(a) + scalar).cpu()
    except NotImplementedError as error:
        # Named as the result's dtype or as the wrapped scalar's (complex128 for 1j).
        wrapped = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}[type(scalar)]
        dtypes = {str(d).removeprefix("torch.") for d in (expected.dtype, wrapped)}
        assert "aten::add" in str(error) and any(d in str(error) for d in dtypes)
        return
    assert got.dtype == expected.dtype
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def test_unregistered_op_raises_not_implemented_naming_it():
    # An operator with neither a CPU kernel nor a composite (CUDA's fused
    # dropout) is one of the few operators left without one.
    x = dev(sample((5,), torch.float32)).abs()
    with pytest.raises(NotImplementedError, match="aten::_fused_dropout"):
        torch._fused_dropout(x, 0.5)


# --- autograd ------------------------------------------------------------------


def test_autograd_through_add():
    a = sample((3, 4), torch.float32, 1)
    x = dev(a).requires_grad_()
    y = x + x
    assert y.requires_grad and y.grad_fn is not None
    grad = sample((3, 4), torch.float32, 2)
    y.backward(dev(grad))
    assert x.grad is not None and x.grad.device.type == "infini"
    xc = a.clone().requires_grad_()
    (xc + xc).backward(grad)
    torch.testing.assert_close(x.grad.cpu(), xc.grad, rtol=0, atol=0)


def test_autograd_through_broadcast_add_to_two_leaves():
    a, b = sample((3, 4), torch.float32, 1), sample((3, 4), torch.float32, 2)
    x, y = dev(a).requires_grad_(), dev(b).requires_grad_()
    grad = sample((3, 4), torch.float32, 3)
    (x + y).backward(dev(grad))
    torch.testing.assert_close(x.grad.cpu(), grad, rtol=0, atol=0)
    torch.testing.assert_close(y.grad.cpu(), grad, rtol=0, atol=0)


@pytest.mark.skipif(ALPHA_SUPPORTED, reason="the provider computes alpha natively")
def test_alpha_the_provider_cannot_run_falls_back_when_enabled():
    """A call the provider cannot run (alpha on InfiniOps without alpha) is an
    error by default and runs through the opt-in CPU fallback when it is on."""
    import torch_infini.fallback as fallback

    a, b = sample((4, 5), torch.float32, 1), sample((4, 5), torch.float32, 2)
    with pytest.raises(NotImplementedError, match="alpha"):
        torch.add(dev(a), dev(b), alpha=2.5)
    with fallback.enabled(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_matches(torch.add(dev(a), dev(b), alpha=2.5), torch.add(a, b, alpha=2.5))
        da = dev(a)
        da.add_(dev(b), alpha=-0.5)
        assert_matches(da, a + b * -0.5)
