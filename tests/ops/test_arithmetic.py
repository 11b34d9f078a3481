"""aten::sub and aten::mul (.Tensor, _.Tensor, .out), the element-wise table
of ops/arithmetic.cpp beside add (tests/ops/test_add.py), against CPU
PyTorch: values bit for bit, dtypes, shapes, strides and errors. On the host
runtime the table's own kernel serves them; on the Infini stack they go to
the generic kernel, and the same oracle holds."""

from __future__ import annotations

import operator

import pytest
import torch

from infini_testing import assert_same as _assert_same
from infini_testing import matches_cpu as _matches_cpu
from infini_testing import on_host, unserved_skips

# Bit for bit on the host runtime, which runs ATen's CPU kernels (a number
# rounded to float16 before a mul is one ulp off); the Infini stack rounds
# its own way (infini_testing's tolerances).
EXACT = dict(rtol=0, atol=0) if on_host() else {}


def assert_same(got, want):
    _assert_same(got, want, **EXACT)


def matches_cpu(fn, *args):
    return _matches_cpu(fn, *args, **EXACT)

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64,
          torch.int8, torch.uint8]
IDS = [str(d).replace("torch.", "") for d in DTYPES]
OPS = {"sub": torch.sub, "mul": torch.mul}


def sample(shape, dtype, seed: int = 0) -> torch.Tensor:
    """Deterministic values of ``dtype``; float ones with bits below float16's."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * 30).to(dtype)
    lo, hi = (0, 200) if dtype == torch.uint8 else (-100, 100)
    return torch.randint(lo, hi, shape, generator=g).to(dtype)


SHAPES = {
    "0d": ((), ()),
    "empty": ((0,), (0,)),
    "same": ((3, 4), (3, 4)),
    "col_row": ((3, 1), (1, 4)),
    "trailing": ((2, 3, 4), (4,)),
    "0d_rhs": ((2, 3), ()),
    "large": ((257, 33), (257, 33)),
}


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shapes", list(SHAPES.values()), ids=list(SHAPES))
@pytest.mark.parametrize("name", list(OPS))
def test_functional_matches_cpu(name, shapes, dtype):
    matches_cpu(OPS[name], sample(shapes[0], dtype), sample(shapes[1], dtype, seed=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.float16], ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_strided_operands_keep_cpus_output_strides(name, dtype):
    a = sample((5, 6), dtype).t()
    b = sample((6, 5), dtype, seed=1)[:, ::1]
    matches_cpu(OPS[name], a, b)
    matches_cpu(OPS[name], a, sample((6, 10), dtype, seed=2)[:, ::2])


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_in_place_and_out_match_cpu(name, dtype):
    method = getattr(torch.Tensor, f"{name}_")
    a, b = sample((4, 5), dtype), sample((5,), dtype, seed=1)
    got = unserved_skips(lambda: method(a.to("infini"), b.to("infini")))
    assert_same(got, method(a.clone(), b))
    # into a strided view: written in place, its strides kept
    base = sample((5, 4), dtype)
    want_base = base.clone()
    method(want_base.t(), b)
    dev_base = base.to("infini")
    method(dev_base.t(), b.to("infini"))
    assert_same(dev_base, want_base)
    # out=, resized from empty as on CPU, and into a transposed out
    out = torch.empty(0, dtype=dtype)
    want = OPS[name](a, b, out=out)
    got = OPS[name](a.to("infini"), b.to("infini"), out=torch.empty(0, dtype=dtype, device="infini"))
    assert_same(got, want)
    t_out = torch.empty(5, 4, dtype=dtype).t()
    dev_t_out = torch.empty(5, 4, dtype=dtype, device="infini").t()
    OPS[name](a, b, out=t_out)
    OPS[name](a.to("infini"), b.to("infini"), out=dev_t_out)
    assert dev_t_out.stride() == t_out.stride()
    assert_same(dev_t_out, t_out)


@pytest.mark.parametrize("name", list(OPS))
def test_self_aliasing_matches_cpu(name):
    a = sample((16,), torch.float32)
    x = a.to("infini")
    getattr(x, f"{name}_")(x)
    assert_same(x, getattr(a.clone(), f"{name}_")(a))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.int32, torch.int64],
                         ids=str)
@pytest.mark.parametrize("number", [0.1, 1 / 3, -2.5, 7, True])
@pytest.mark.parametrize("name", list(OPS))
def test_a_python_number_matches_cpu(name, number, dtype):
    """CPU multiplies a float16 or bfloat16 tensor by a float number
    unrounded: the result must not see the number rounded to the dtype."""
    a = sample((300,), dtype)
    if name == "sub" and isinstance(number, bool):
        with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with a bool tensor"):
            a.to("infini") - number
        return
    for f in (lambda t: OPS[name](t, number), lambda t: OPS[name](t, torch.tensor(number))):
        assert_same(f(a.to("infini")), f(a))
    if name == "mul":
        assert_same(number * a.to("infini"), number * a)


@pytest.mark.parametrize("alpha", [2, -3, 0])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.float32], ids=str)
def test_sub_alpha_matches_cpu(dtype, alpha):
    matches_cpu(lambda a, b: torch.sub(a, b, alpha=alpha), sample((7,), dtype), sample((7,), dtype, seed=1))
    if dtype.is_floating_point:
        matches_cpu(lambda a, b: torch.sub(a, b, alpha=0.75), sample((7,), dtype), sample((7,), dtype, seed=1))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64], ids=str)
@pytest.mark.parametrize("name", list(OPS))
def test_integer_overflow_wraps_as_on_cpu(name, dtype):
    info = torch.iinfo(dtype)
    a = torch.tensor([info.max, info.min, info.max // 2 + 7, -1], dtype=dtype)
    b = torch.tensor([3, 2, 5, info.min], dtype=dtype)
    matches_cpu(OPS[name], a, b)


def test_float_special_values_match_cpu():
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4e38])
    a, b = specials.repeat_interleave(7), specials.repeat(7)
    for op in OPS.values():
        matches_cpu(op, a, b)


def test_promotion_and_dtypes_beyond_the_table_follow_cpu():
    f32, i64, f16 = sample((6,), torch.float32), sample((6,), torch.int64), sample((6,), torch.float16)
    c64, b = torch.randn(6, dtype=torch.complex64), torch.tensor([True, False] * 3)
    for op in OPS.values():
        matches_cpu(op, f32, i64)
        matches_cpu(op, f16, f32)
        matches_cpu(op, i64, 2.5)
        matches_cpu(op, c64, f32)
    matches_cpu(torch.mul, b, b)
    with pytest.raises(RuntimeError, match="Subtraction, the `-` operator, with two bool tensors"):
        b.to("infini") - b.to("infini")
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        torch.sub(i64.to("infini"), i64.to("infini"), alpha=1.5)
    # an out= of another dtype: CPU's cast rule for out=
    want = torch.mul(f32, f32, out=torch.empty(6, dtype=torch.float64))
    got = torch.mul(f32.to("infini"), f32.to("infini"), out=torch.empty(6, dtype=torch.float64, device="infini"))
    assert_same(got, want)


@pytest.mark.parametrize("name", list(OPS))
def test_errors_raise_like_cpu(name):
    a = sample((3,), torch.float32).to("infini")
    with pytest.raises(RuntimeError, match="same device") as info:
        OPS[name](a, torch.ones(3))
    assert "cpu" in str(info.value) and "infini" in str(info.value)
    with pytest.raises(RuntimeError, match="same device"):
        OPS[name](torch.ones(3), a)
    method = getattr(a, f"{name}_")
    with pytest.raises(RuntimeError, match="doesn't match the broadcast shape"):
        method(torch.ones(2, 3, device="infini"))
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x = torch.ones(4, device="infini")
        OPS[name](x[:3], x[1:], out=x[1:])


def test_gradients_match_cpu():
    a, b = sample((4, 3), torch.float64), sample((3,), torch.float64, seed=1)
    grads = []
    for device in ("cpu", "infini"):
        x = a.to(device).detach().requires_grad_()
        y = b.to(device).detach().requires_grad_()
        ((x * y - y * 2) * x).sum().backward()
        grads.append((x.grad.cpu(), y.grad.cpu()))
    for got, want in zip(grads[1], grads[0]):
        torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_operator_forms_match_cpu():
    a, b = sample((3, 4), torch.float32), sample((4,), torch.float32, seed=1)
    for op in (operator.sub, operator.mul, operator.isub, operator.imul):
        matches_cpu(lambda x, y: op(x.clone(), y), a, b)


@pytest.mark.parametrize("numel", [7, 8, 9, 4095, 4096, 4097])
@pytest.mark.parametrize("name", ["add", "sub", "mul"])
def test_sizes_around_the_small_loops_edges_match_cpu(name, numel):
    """The host runtime's small dense loop (blocks of eight, up to 4096
    elements; ATen's kernel beyond): a block's edge, the tail, in place."""
    op, method = getattr(torch, name), getattr(torch.Tensor, f"{name}_")
    for dtype in (torch.float32, torch.int64):
        a, b = sample((numel,), dtype), sample((numel,), dtype, seed=1)
        matches_cpu(op, a, b)
        x = a.to("infini")
        method(x, x)
        assert_same(x, method(a.clone(), a))
