"""torch.ops.infini.* fused operators (InfiniOps' Swiglu, SiluAndMul and
CausalSoftmax, which have no ATen operator): forward against a plain PyTorch
reference on the CPU, gradients against the reference's autograd, on the CPU
and on infini."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from torch.nn import functional as F

from infini_testing import DEV, on_host, unserved_skips


def _reference(name, *xs):
    if name == "swiglu":
        return xs[0] * F.silu(xs[1])
    if name == "silu_and_mul":
        d = xs[0].shape[-1] // 2
        return F.silu(xs[0][..., :d]) * xs[0][..., d:]
    seq, total = xs[0].shape[-2:]
    keep = torch.ones(seq, total, dtype=torch.bool).tril(total - seq)
    return torch.softmax(xs[0].masked_fill(~keep, float("-inf")), -1)


INPUTS = {
    "swiglu": lambda g: [torch.randn(3, 8, generator=g), torch.randn(3, 8, generator=g)],
    "silu_and_mul": lambda g: [torch.randn(2, 3, 16, generator=g)],
    "causal_softmax": lambda g: [torch.randn(2, 4, 7, generator=g)],  # 3 cached positions
}


@pytest.mark.parametrize("device", ["cpu", "infini"])
@pytest.mark.parametrize("name", sorted(INPUTS))
def test_fused_op_matches_reference_forward_and_backward(name, device):
    xs = INPUTS[name](torch.Generator().manual_seed(0))
    ref_in = [x.clone().requires_grad_() for x in xs]
    want = _reference(name, *ref_in)
    grad = torch.randn(want.shape, generator=torch.Generator().manual_seed(1))
    want.backward(grad)
    dev = DEV if device == "infini" else torch.device("cpu")
    ins = [x.to(dev).requires_grad_() for x in xs]
    got = unserved_skips(lambda: getattr(torch.ops.infini, name)(*ins))
    assert got.device.type == dev.type
    torch.testing.assert_close(got.detach().cpu(), want.detach())
    unserved_skips(lambda: got.backward(grad.to(dev)))
    for a, r in zip(ins, ref_in):
        torch.testing.assert_close(a.grad.cpu(), r.grad)


# --- where they run ---------------------------------------------------------------


def _kernel_served(kernel: str) -> bool:
    """Whether the provider's operator table lists InfiniOps' ``kernel``."""
    import torch_infini

    return any(row["kernel"].startswith(f"infini::ops::{kernel}") for row in torch_infini.operator_table())


def _kinds(op: str) -> dict[str, int]:
    from torch_infini import fallback

    return {r["kind"]: r["calls"] for r in fallback.coverage() if r["op"] == op}


FUSED_KERNEL = {"swiglu": "Swiglu", "silu_and_mul": "SiluAndMul", "causal_softmax": "CausalSoftmax"}


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_fused_op_runs_on_the_fused_kernel_where_served(name, native_only):
    """On a provider with InfiniOps' kernel the call runs there (one native
    call, none of the composition's parts); elsewhere (the host runtime) it is
    composed of ATen operators, and reported so."""
    from torch_infini import fallback

    xs = [x.to(DEV) for x in INPUTS[name](torch.Generator().manual_seed(0))]
    fused = _kernel_served(FUSED_KERNEL[name]) or (name == "silu_and_mul" and _kernel_served("Swiglu"))
    with fallback.recording():
        got = unserved_skips(lambda: getattr(torch.ops.infini, name)(*xs))
    torch.testing.assert_close(got.cpu(), _reference(name, *[x.cpu() for x in xs]))
    assert _kinds(f"infini::{name}") == {"native" if fused else "composite": 1}
    if fused:
        assert not _kinds("aten::silu") and not _kinds("aten::_softmax"), fallback.coverage()


RMS_CASES = {
    "2d": lambda g: (torch.randn(5, 16, generator=g), (16,), True),
    "3d": lambda g: (torch.randn(2, 3, 16, generator=g), (16,), True),
    "4d": lambda g: (torch.randn(2, 2, 3, 8, generator=g), (8,), True),
    "1d": lambda g: (torch.randn(8, generator=g), (8,), True),
    "3d_strided": lambda g: (torch.randn(3, 2, 16, generator=g).transpose(0, 1), (16,), True),
    "no_weight": lambda g: (torch.randn(4, 8, generator=g), (8,), False),
    "two_dims": lambda g: (torch.randn(3, 4, 8, generator=g), (4, 8), True),
}


def _fusable(case: str, dtype: torch.dtype) -> bool:
    return case not in ("no_weight", "two_dims") and dtype != torch.float64


@pytest.mark.parametrize("eps", [None, 1e-5])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.float64],
                         ids=["float32", "bfloat16", "float16", "float64"])
@pytest.mark.parametrize("case", sorted(RMS_CASES))
def test_rms_norm_matches_cpu(case, dtype, eps):
    """F.rms_norm forward and gradients equal CPU's, on InfiniOps' RmsNorm
    where it serves the call and on PyTorch's decomposition elsewhere. On the
    Infini stack the CPU fallback is on for the parts InfiniOps has no kernel
    for (the decomposition's reductions, the gradient's)."""
    from torch_infini import fallback

    with contextlib.ExitStack() as scope:
        if not on_host():
            scope.enter_context(fallback.enabled())
            scope.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore", UserWarning)
        _check_rms_norm(case, dtype, eps)


def _check_rms_norm(case, dtype, eps):
    from torch_infini import fallback

    g = torch.Generator().manual_seed(0)
    x, shape, with_weight = RMS_CASES[case](g)
    w = torch.randn(shape, generator=g) if with_weight else None
    x = x.to(dtype)
    w = None if w is None else w.to(dtype)
    grad = torch.randn(x.shape, generator=g).to(dtype)
    ref = [x.clone().requires_grad_()] + ([w.clone().requires_grad_()] if w is not None else [])
    want = F.rms_norm(ref[0], shape, ref[1] if w is not None else None, eps)
    want.backward(grad)
    ins = [t.to(DEV).requires_grad_() for t in ([x] + ([w] if w is not None else []))]
    fallback.reset_coverage()
    with fallback.recording():
        got = unserved_skips(lambda: F.rms_norm(ins[0], shape, ins[1] if w is not None else None, eps))
    kinds = _kinds("aten::rms_norm")
    fused = _kernel_served("RmsNorm") and _fusable(case, dtype)
    assert kinds == {"native" if fused else "composite": 1}, fallback.coverage()
    tol = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=2e-3),
           torch.bfloat16: dict(rtol=1.6e-2, atol=2e-2), torch.float64: {}}[dtype]
    assert got.shape == want.shape and got.dtype == want.dtype and got.is_contiguous()
    torch.testing.assert_close(got.detach().cpu(), want.detach(), **tol)
    unserved_skips(lambda: got.backward(grad.to(DEV)))
    for a, r in zip(ins, ref):
        torch.testing.assert_close(a.grad.cpu(), r.grad, **{k: v * 4 for k, v in tol.items()})
