"""mm, addmm, bmm, baddbmm, dot and the matmul / linear paths built on them,
on infini against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import torch_infini
from infini_testing import on_host, DEV, FLOAT_IDS, FLOATS, matches_cpu, sample


def rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS + [torch.float64], ids=FLOAT_IDS + ["float64"])
def test_mm_and_addmm(dtype):
    a, b, c = rand(5, 7, dtype=dtype), rand(7, 3, dtype=dtype, seed=1), rand(5, 3, dtype=dtype, seed=2)
    matches_cpu(torch.mm, a, b)
    matches_cpu(torch.addmm, c, a, b)
    matches_cpu(lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0), c, a, b)
    matches_cpu(lambda c, a, b: torch.addmm(c[0], a, b), c, a, b)  # broadcast bias, as linear passes it


# CPU's own addmm on the host runtime; on a stack whose InfiniOps has
# ATen-backed kernels, at::addmm_out in one launch (InfiniOps' Gemm of the
# current API takes no bias: a product and an Add would round twice).
CPUS_ADDMM = on_host() or bool(torch_infini.build_info()["infini_ops_aten_backed"])


@pytest.mark.skipif(not CPUS_ADDMM, reason="a WITH_TORCH=OFF stack adds a bias after the product, rounding twice "
                                           "(within tolerance: test_mm_and_addmm)")
@pytest.mark.parametrize("shape", [(24, 32, 96), (7, 33, 5), (3, 500, 4)], ids=str)
def test_addmm_with_a_bias_is_cpus_bit_for_bit(shape):
    """A linear layer's addmm (bias row, and a full bias with beta and
    alpha): CPU's one rounding of the product plus the bias."""
    m, k, n = shape
    a, b, c = rand(m, k), rand(k, n, seed=1), rand(n, seed=2)
    for args, kwargs in [((c, a, b), {}), ((c.expand(m, n).contiguous(), a, b), {"beta": 0.5, "alpha": 2.0})]:
        got = torch.addmm(*[t.to(DEV) for t in args], **kwargs)
        assert torch.equal(got.cpu(), torch.addmm(*args, **kwargs)), kwargs


def test_transposed_and_sliced_operands():
    a, b = rand(7, 5), rand(3, 7, seed=1)
    matches_cpu(lambda a, b: a.t() @ b.t(), a, b)
    matches_cpu(lambda a, b: a[1:, ::2] @ b[:, 1::2], a, b)
    x = rand(4, 6, 8)
    matches_cpu(lambda x: x.transpose(1, 2) @ x, x)


def test_bmm_baddbmm_and_matmul_broadcasting():
    a, b = rand(3, 4, 5), rand(3, 5, 2, seed=1)
    matches_cpu(torch.bmm, a, b)
    matches_cpu(lambda c, a, b: torch.baddbmm(c, a, b, beta=0.25, alpha=-1.0), rand(3, 4, 2, seed=2), a, b)
    matches_cpu(torch.matmul, rand(2, 3, 4, 5), rand(5, 6, seed=1))       # 4-D @ 2-D
    matches_cpu(torch.matmul, rand(2, 1, 4, 5), rand(3, 5, 2, seed=1))    # batch broadcast
    matches_cpu(torch.matmul, rand(5), rand(5, 3, seed=1))                # vector @ matrix
    matches_cpu(torch.matmul, rand(4, 5), rand(5, seed=1))                # matrix @ vector
    matches_cpu(torch.matmul, rand(5), rand(5, seed=1))                   # dot


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_linear_with_and_without_bias(dtype):
    x, w, bias = rand(2, 3, 8, dtype=dtype), rand(4, 8, dtype=dtype, seed=1), rand(4, dtype=dtype, seed=2)
    matches_cpu(F.linear, x, w, bias)
    matches_cpu(F.linear, x, w)
    matches_cpu(F.linear, x[0, 0], w, bias)  # 1-D input


def test_empty_shapes():
    matches_cpu(torch.mm, rand(0, 3), rand(3, 4))
    matches_cpu(torch.mm, rand(3, 0), rand(0, 4))  # K = 0: zeros
    matches_cpu(torch.addmm, rand(3, 4), rand(3, 0), rand(0, 4))  # beta * self
    matches_cpu(torch.bmm, rand(0, 2, 3), rand(0, 3, 4))


def test_out_and_in_place():
    a, b, c = rand(4, 5), rand(5, 6, seed=1), rand(4, 6, seed=2)
    matches_cpu(lambda a, b: torch.mm(a, b, out=torch.empty(0, device=a.device)), a, b)
    matches_cpu(lambda c, a, b: c.clone().addmm_(a, b, alpha=3), c, a, b)
    matches_cpu(lambda c, a, b: torch.addmm(c, a, b, out=torch.empty(4, 6, device=a.device)), c, a, b)


def test_shape_and_dtype_errors_are_cpus():
    a = torch.ones(2, 3, device=DEV)
    for bad, cpu_bad in ((torch.ones(4, 2, device=DEV), torch.ones(4, 2)),
                         (torch.ones(3, 2, device=DEV, dtype=torch.float16), torch.ones(3, 2, dtype=torch.float16))):
        with pytest.raises(RuntimeError):
            torch.mm(torch.ones(2, 3), cpu_bad)
        with pytest.raises(RuntimeError, match=r"shape|dim|dtype"):  # raised at the call, before any work
            torch.mm(a, bad)


def test_integer_matmul_as_cpu_or_refused_naming_the_dtype():
    a, b = sample((2, 2), torch.int64), sample((2, 2), torch.int64)
    if on_host():
        torch.testing.assert_close(torch.mm(a.to(DEV), b.to(DEV)).cpu(), torch.mm(a, b), rtol=0, atol=0)
        return
    with pytest.raises(NotImplementedError, match=r"aten::mm.*dtype int64 is not supported.*float32"):
        torch.mm(a.to(DEV), b.to(DEV))


def test_operands_on_two_devices_raise():
    with pytest.raises(RuntimeError, match="same infini device"):
        torch.mm(torch.ones(2, 2, device=DEV), torch.ones(2, 2))
