"""torch.ops.infini.* fused operators (InfiniOps' Swiglu, SiluAndMul and
CausalSoftmax, which have no ATen operator): forward against a plain PyTorch
reference on the CPU, gradients against the reference's autograd, on the CPU
and on infini."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from infini_testing import DEV, unserved_skips


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
