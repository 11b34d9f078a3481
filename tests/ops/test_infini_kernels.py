"""The Infini provider's ATen kernels on InfiniOps (csrc/runtime/infini/):
what each InfiniOps build serves runs natively (no fallback) and matches CPU;
what it cannot run exactly is refused with a reason naming the InfiniOps
kernel and its limit, and the hint to the CPU fallback or the host runtime.

Skipped on the host runtime (its kernels are ATen's own)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_infini
from infini_testing import DEV, FLOAT_IDS, FLOATS, on_host, to_device

pytestmark = [
    pytest.mark.skipif(on_host(), reason="InfiniOps kernels: Infini provider only"),
    pytest.mark.skipif(torch_infini.fallback.is_enabled(),
                       reason="with the CPU fallback on, refusals run on the CPU"),
]

HINT = r"CPU fallback.*TORCH_INFINI_PROVIDER=host"


def kernels() -> str:
    return " ".join(row["kernel"] for row in torch_infini.operator_table())


def served(kernel: str) -> bool:
    """Whether this build serves through InfiniOps' ``kernel`` (e.g. "Relu")."""
    return f"infini::ops::{kernel}" in kernels()


def aten_backed(kernel: str) -> bool:
    """Whether this build has InfiniOps' ATen-backed ``kernel`` (built
    WITH_TORCH=ON), which serves the calls its native one refuses."""
    return any(f"infini::ops::{kernel} (" in row["kernel"] and "ATen-backed" in row["kernel"]
               for row in torch_infini.operator_table())


def cat_takes_strides() -> bool:
    row = next(r for r in torch_infini.operator_table() if r["op"] == "aten::cat")
    return row["strided"]


def rand(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


def ulps(got: torch.Tensor, want: torch.Tensor) -> int:
    """The largest distance in units of the last place between two tensors
    of one reduced-precision dtype (finite values)."""
    a = got.cpu().contiguous().view(torch.int16).to(torch.int32)
    b = want.contiguous().view(torch.int16).to(torch.int32)
    # Sign-magnitude to a monotonic integer line.
    a = torch.where(a < 0, -(a & 0x7FFF), a)
    b = torch.where(b < 0, -(b & 0x7FFF), b)
    return int((a - b).abs().max())


def close(got: torch.Tensor, want: torch.Tensor) -> None:
    assert got.device.type == "infini" and got.dtype == want.dtype and got.shape == want.shape
    if want.dtype in (torch.float16, torch.bfloat16):
        assert ulps(got, want) <= 1, ulps(got, want)
    else:
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)


def native(fn, *args):
    """``fn`` on infini, natively (the fallback is off), against CPU."""
    want = fn(*args)
    got = fn(*to_device(args))
    close(got, want)


# ------------------------------------------------------------------ Gemm

def bias_added_afterwards() -> bool:
    """Whether this build's Gemm has no beta, so that a bias other than
    F.linear's is added by a second kernel (float32 only)."""
    row = next(r for r in torch_infini.operator_table() if r["op"].startswith("matmul:"))
    return "infini::ops::Add" in row["kernel"]


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_gemm_serves_mm_bmm_and_linear_bias(dtype):
    a, b, c = rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype, seed=1), rand(5, 3, dtype=dtype, seed=2)
    native(torch.mm, a, b)
    native(lambda a, b: a.t().contiguous().t() @ b.t().contiguous().t(), a, b)  # column-major operands
    native(lambda c, a, b: torch.addmm(c[0], a, b), c, a, b)  # F.linear's bias row
    native(lambda c, a, b: torch.addmm(c, a, b, beta=0), torch.full_like(c, float("nan")), a, b)  # ignored
    native(lambda c, a, b: torch.addmm(c, a, b, beta=0, alpha=-2.0), c, a, b)
    x, y = rand(3, 4, 5, dtype=dtype), rand(3, 5, 2, dtype=dtype, seed=1)
    native(torch.bmm, x, y)
    native(lambda x, y: x.transpose(1, 2) @ y.transpose(1, 2), rand(3, 5, 4, dtype=dtype), rand(3, 2, 5, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_gemm_bias_with_beta_and_alpha(dtype):
    """addmm, addmm_, baddbmm, addmv with any bias, beta and alpha: fused by
    Gemm's beta where it has one; otherwise added by Add in float32 only."""
    a, b, c = rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype, seed=1), rand(5, 3, dtype=dtype, seed=2)
    x, y, z = rand(3, 4, 5, dtype=dtype), rand(3, 5, 2, dtype=dtype, seed=1), rand(3, 4, 2, dtype=dtype, seed=2)
    # Each case with the InfiniOps operator whose ATen-backed implementation
    # serves it where the stack has one (a stack built with a list of ATen
    # operators may have Addmm and not the others).
    cases = [
        ("Addmm", torch.addmm, (c, a, b)),
        ("Addmm", lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), (c, a, b)),
        ("Addmm", lambda c, a, b: c.clone().addmm_(a, b, beta=-1.5, alpha=0.25), (c, a, b)),
        ("Baddbmm", lambda z, x, y: torch.baddbmm(z, x, y, beta=0.25, alpha=-1.0), (z, x, y)),
        ("Addmv", lambda v, m, u: torch.addmv(v, m, u, beta=2.0), (rand(5, dtype=dtype), a, rand(7, dtype=dtype, seed=3))),
    ]
    for kernel, fn, args in cases:
        if dtype != torch.float32 and bias_added_afterwards() and not aten_backed(kernel):
            with pytest.raises(NotImplementedError, match=r"infini::ops::Gemm.*round twice.*" + HINT):
                fn(*to_device(args))
        else:
            native(fn, *args)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_gemm_serves_linear_with_bias(dtype):
    x, w, bias = rand(2, 3, 8, dtype=dtype), rand(4, 8, dtype=dtype, seed=1), rand(4, dtype=dtype, seed=2)
    native(F.linear, x, w, bias)
    native(F.linear, x, w)


def test_gemm_refusals_name_the_kernel():
    a = torch.ones(2, 3, dtype=torch.float64)
    if aten_backed("Mm"):  # what the native Gemm refuses, InfiniOps' ATen-backed Mm serves
        native(lambda a: torch.mm(a, a.t()), a)
        return
    with pytest.raises(NotImplementedError, match=r"aten::mm .*infini::ops::Gemm.*float64.*float32.*" + HINT):
        torch.mm(a.to(DEV), a.to(DEV).t())


# ------------------------------------------------------------------- Mul

@pytest.mark.parametrize("dtype", FLOATS + [torch.int32], ids=FLOAT_IDS + ["int32"])
def test_mul_serves_one_dtype_broadcast_strided_in_place(dtype):
    a, b = rand(4, 6).mul(4).to(dtype), rand(6, seed=1).mul(4).to(dtype)
    native(torch.mul, a, b)
    native(lambda a, b: a.t() * b[:4], a, b)
    native(lambda a, b: a[:, ::2] * b[::2], a, b)
    native(lambda a, b: a.clone().mul_(b), a, b)
    native(lambda a, b: torch.mul(a, b, out=torch.empty(0, dtype=a.dtype, device=a.device)), a, b)


def test_mul_refusals_name_the_kernel():
    """What the native Mul cannot run: refused, or, where the build has the
    ATen-backed Mul, run there exactly as CPU does."""
    x = rand(3)
    mixed = lambda x: x * x.half()  # noqa: E731
    scalar = lambda x: x.half() * 0.1  # noqa: E731  PyTorch multiplies by float32's 0.1, not float16's
    if aten_backed("Mul"):
        native(mixed, x)
        native(scalar, x)
        return
    with pytest.raises(NotImplementedError, match=r"infini::ops::Mul needs one dtype.*" + HINT):
        mixed(x.to(DEV))
    with pytest.raises(NotImplementedError, match=r"infini::ops::Mul.*CPU scalar.*not exactly.*" + HINT):
        scalar(x.to(DEV))


def test_mul_serves_cpu_scalars_exact_in_the_dtype():
    x = rand(3, 4)
    native(lambda x: x * 2.5, x)
    native(lambda x: x * 0.1, x)  # float32 output: read as float32 by both
    native(lambda x: x.half() * 2.5, x)
    native(lambda x: x * torch.tensor(3.0), x)
    native(lambda i: i * 3, torch.arange(12).reshape(3, 4))
    native(lambda x: 2.0 * x, x)


# ------------------------------------------------------------ Relu, Silu

@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_relu_and_silu(dtype):
    x = rand(5, 7, dtype=dtype)
    for kernel, fn, fn_ in (("Relu", torch.relu, torch.relu_), ("Silu", F.silu, lambda t: F.silu(t, inplace=True))):
        if served(kernel):
            native(fn, x)
            native(lambda x: fn(x.t()[1:]), x)
            native(lambda x: fn_(x.clone()), x)
        else:
            with pytest.raises(NotImplementedError,
                               match=rf"InfiniOps has no kernel for aten::{kernel.lower()}.*" + HINT):
                fn(x.to(DEV))


# ------------------------------------------------------------------- Cat

@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int64, torch.bool], ids=str)
def test_cat(dtype):
    a, b = rand(2, 3).mul(3).to(dtype), rand(4, 3, seed=1).mul(3).to(dtype)
    native(lambda a, b: torch.cat([a, b]), a, b)
    if cat_takes_strides():
        native(lambda a, b: torch.cat([a.t(), b.t()], dim=-1), a, b)
    native(lambda a, b: torch.cat([a, torch.empty(0, dtype=a.dtype, device=a.device), b]), a, b)


def test_cat_refusals_name_the_kernel():
    a = torch.ones(2, 3, device=DEV)
    if aten_backed("Cat"):  # the native Cat's refusals are served by the ATen-backed one
        native(lambda a: torch.cat([a, a.half()]), a.cpu())
        native(lambda a: torch.cat([a.t(), a.t()]), a.cpu())
        return
    with pytest.raises(NotImplementedError, match=r"infini::ops::Cat.*cannot convert.*" + HINT):
        torch.cat([a, a.half()])
    if not cat_takes_strides():
        with pytest.raises(NotImplementedError, match=r"infini::ops::Cat.*contiguous.*" + HINT):
            torch.cat([a.t(), a.t()])


# ---------------------------------------------------- no InfiniOps kernel

def test_ops_without_an_infini_ops_kernel_name_it():
    # InfiniOps has no operator for histogramdd's bin edges, and nothing
    # decomposes them.
    with pytest.raises(NotImplementedError,
                       match=r"aten::_histogramdd_bin_edges.*InfiniOps has no kernel.*TORCH_INFINI_PROVIDER=host"):
        torch.histogramdd(torch.ones(3, 2, device=DEV), bins=[2, 2])
    if aten_backed("internal::Softmax"):
        native(lambda x: torch.softmax(x, dim=-1), rand(2, 3))
    else:
        with pytest.raises(NotImplementedError, match=r"aten::_softmax .*InfiniOps.*" + HINT):
            torch.softmax(torch.ones(2, 3, device=DEV), dim=-1)


def test_bound_operators_say_how_they_run():
    """Every InfiniOps operator bound to an ATen overload is listed with the
    implementations this build has for the device."""
    rows = {r["op"]: r["kernel"] for r in torch_infini.operator_table()}
    assert "native 0" in rows["aten::mul.out"] and "infini::ops::Mul" in rows["aten::mul.out"]
    if served("Relu"):
        assert "infini::ops::Relu" in rows["aten::relu_"]


def test_operator_table_names_the_kernels():
    table = kernels()
    for kernel in ("Gemm", "Mul", "Cat"):
        assert f"infini::ops::{kernel}" in table, kernel
