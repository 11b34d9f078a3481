"""Elementwise operators on infini against CPU PyTorch: arithmetic (mul, sub,
div, pow, maximum), unary math and activations, comparisons and logic; with
broadcasting, strided and empty inputs, scalars, type promotion, out= and
in-place."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infini_testing import on_host, DEV, FLOAT_IDS, FLOATS, matches_cpu, sample

BINARY = {
    "mul": torch.mul,
    "sub": torch.sub,
    "sub_alpha": lambda a, b: torch.sub(a, b, alpha=2),
    "div": torch.div,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
    "div_trunc": lambda a, b: torch.div(a, b, rounding_mode="trunc"),
    "pow": lambda a, b: torch.pow(a.abs() + 0.5, b),
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}

UNARY = {
    "neg": torch.neg, "abs": torch.abs, "relu": torch.relu, "silu": F.silu, "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "sigmoid": torch.sigmoid, "tanh": torch.tanh,
    "exp": torch.exp, "rsqrt": lambda x: torch.rsqrt(x.abs() + 0.1), "sqrt": lambda x: torch.sqrt(x.abs()),
    "log": lambda x: torch.log(x.abs() + 0.1), "reciprocal": lambda x: torch.reciprocal(x + 100),
    "pow_scalar": lambda x: x.pow(2), "pow_half": lambda x: x.abs().pow(0.5), "ceil": torch.ceil,
    "floor": torch.floor,
}


def values(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 3).to(dtype)


@pytest.mark.parametrize("op", BINARY, ids=list(BINARY))
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_binary_broadcast_and_strided(op, dtype):
    fn = BINARY[op]
    a, b = values(4, 6, dtype=dtype), values(6, dtype=dtype, seed=1) + 0.5
    matches_cpu(fn, a, b)
    matches_cpu(lambda a, b: fn(a.t(), b[:4]), a, b)       # transposed input
    matches_cpu(lambda a, b: fn(a[:, ::2], b[::2]), a, b)  # strided views


@pytest.mark.parametrize("op", UNARY, ids=list(UNARY))
@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_unary(op, dtype):
    fn = UNARY[op]
    x = values(5, 7, dtype=dtype)
    matches_cpu(fn, x)
    matches_cpu(lambda x: fn(x.t()[1:]), x)
    matches_cpu(fn, values(0, 3, dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.uint8], ids=str)
def test_integer_arithmetic(dtype):
    a, b = sample((3, 4), dtype), sample((4,), dtype)
    matches_cpu(torch.mul, a, b)
    matches_cpu(torch.sub, a, b)
    matches_cpu(lambda a, b: torch.div(a, b.clamp(min=1)), a, b)  # true division: float32 result
    matches_cpu(lambda a, b: torch.div(a, b.clamp(min=1), rounding_mode="floor"), a, b)


def test_scalars_and_type_promotion_follow_cpu():
    x, i = values(3, 4), sample((3, 4), torch.int64)
    matches_cpu(lambda x: x * 2.5, x)
    matches_cpu(lambda x: 1 - x, x)
    matches_cpu(lambda x: x / 3, x)
    matches_cpu(lambda i: i * 2, i)                          # stays int64
    matches_cpu(lambda i: i * 0.5, i)                        # float32 result
    matches_cpu(lambda x, i: x * i, x, i)                    # float32 result
    matches_cpu(lambda x: x.half() * x, x)                   # float32 result
    matches_cpu(lambda x: x * torch.tensor(2.0), x)          # CPU 0-dim tensor operand


def test_cpu_scalar_tensor_is_read_at_the_call():
    """A CPU 0-dim operand is captured when the op is called, as on CUDA: a
    later change to it does not reach the queued work."""
    s = torch.tensor(2.0)
    x = torch.ones(1000, device=DEV)
    y = x * s
    s.fill_(5.0)
    assert torch.equal(y.cpu(), torch.full((1000,), 2.0))


def test_in_place_and_out():
    a, b = values(4, 5), values(4, 5, seed=1)
    matches_cpu(lambda a, b: a.clone().mul_(b), a, b)
    matches_cpu(lambda a, b: a.clone().sub_(b, alpha=3), a, b)
    matches_cpu(lambda a, b: a.clone().div_(b + 10), a, b)
    matches_cpu(lambda a: a.clone().relu_().sigmoid_().tanh_().neg_().exp_(), a)
    matches_cpu(lambda a: a.clone().pow_(2), a)
    matches_cpu(lambda a, b: torch.mul(a, b, out=torch.empty(0, device=a.device)), a, b)
    matches_cpu(lambda a: torch.exp(a, out=torch.empty(4, 5, device=a.device)), a)
    # a view written in place writes through to its base
    matches_cpu(lambda a, b: a.clone().t()[1:].mul_(2).t(), a, b)


def test_in_place_broadcast_and_overlap_errors_are_cpus():
    for make in (lambda d: torch.ones(3, device=d).mul_(torch.ones(2, 3, device=d)),
                 lambda d: torch.ones(3, device=d).expand(2, 3).mul_(2),
                 lambda d: torch.ones(4, 5, device=d).mul_(torch.ones(4, 3, device=d))):
        with pytest.raises(RuntimeError) as cpu:
            make("cpu")
        # The same error as CPU, raised at the call before any work is queued
        # (on the Infini stack by a meta run, whose wording may differ).
        with pytest.raises(RuntimeError) as infini:
            make(DEV)
        if on_host():
            assert str(infini.value) == str(cpu.value)


COMPARE = {"eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt, "ge": torch.ge}


@pytest.mark.parametrize("op", COMPARE, ids=list(COMPARE))
def test_comparisons(op):
    fn = COMPARE[op]
    a = values(4, 5).round()
    b = values(5, seed=1).round()
    matches_cpu(fn, a, b)
    matches_cpu(lambda a: fn(a, 0.0), a)
    matches_cpu(lambda i, a: fn(i, a.to(torch.int64)), sample((4, 5), torch.int64), a)


def test_logic_and_isfinite():
    x = torch.tensor([1.0, float("inf"), float("nan"), -2.0, 0.0])
    matches_cpu(torch.isfinite, x)
    matches_cpu(lambda x: (x > 0) & (x < 5) | (x == 0), x)
    matches_cpu(lambda x: ~(x > 0), x)
    matches_cpu(lambda x: torch.logical_not(x), x)


@pytest.mark.parametrize("fn", [torch.exp, torch.sigmoid, torch.rsqrt], ids=["exp", "sigmoid", "rsqrt"])
def test_integer_inputs_of_float_math_promote_like_cpu(fn):
    matches_cpu(fn, sample((2, 3), torch.int64).abs() + 1)


def test_unsupported_dtypes_raise_naming_them():
    with pytest.raises(RuntimeError, match="Bool|bool"):  # CPU's own refusal, at the call
        torch.ones(2, dtype=torch.bool, device=DEV) - torch.ones(2, dtype=torch.bool, device=DEV)
