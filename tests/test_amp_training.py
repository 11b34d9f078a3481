"""GradScaler and autocast training on infini against the same loops on the
CPU: the scaler's kernels (_amp_foreach_non_finite_check_and_unscale_,
_amp_update_scale_) find inf/nan, skip the step and update the scale exactly
as CPU's do; an MLP trained 20 steps under autocast(bfloat16) + GradScaler
follows CPU's loss curve."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from infini_testing import DEV, unserved_skips


def mlp(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 8))


def batch(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 + step)
    return torch.randn(16, 32, generator=g), torch.randn(16, 8, generator=g)


def train(model: nn.Module, device: str, steps: int, poison: set[int], autocast_dtype=None):
    """SGD with a GradScaler; at the steps in ``poison`` one gradient is made
    inf before the step. Returns (losses, scales, skipped steps)."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device, init_scale=2.0**10, growth_interval=3)
    losses, scales, skipped = [], [], []
    for step in range(steps):
        x, y = (t.to(device) for t in batch(step))
        opt.zero_grad()
        with torch.autocast(device, dtype=autocast_dtype or torch.bfloat16, enabled=autocast_dtype is not None):
            loss = nn.functional.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        if step in poison:
            next(model.parameters()).grad.view(-1)[3] = float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        if all(torch.equal(b, p.detach()) for b, p in zip(before, model.parameters())):
            skipped.append(step)
        losses.append(loss.item())
        scales.append(scaler.get_scale())
    return losses, scales, skipped


def test_grad_scaler_skips_inf_steps_and_updates_the_scale_like_cpu():
    cpu_model = mlp()
    model = copy.deepcopy(cpu_model).to(DEV)
    want = train(cpu_model, "cpu", 8, poison={2, 5})
    got = unserved_skips(lambda: train(model, "infini", 8, poison={2, 5}))
    assert got[2] == want[2] == [2, 5]      # the poisoned steps, and only they, were skipped
    assert got[1] == want[1]                # halved on inf, doubled after 3 clean steps: exactly CPU's
    torch.testing.assert_close(got[0], want[0], rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), cpu_model.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf"), None], ids=str)
def test_the_scaler_kernels_match_cpu(bad):
    """The two kernels GradScaler calls, directly, on a list of gradients."""
    def run(device: str):
        grads = [torch.full((5,), 8.0, device=device), torch.arange(6.0, device=device).view(2, 3).t()]
        if bad is not None:
            grads[1][1, 0] = bad
        found = torch.zeros(1, device=device)
        torch._amp_foreach_non_finite_check_and_unscale_(grads, found, torch.full((1,), 0.25, device=device))
        scale, tracker = torch.full((1,), 4.0, device=device), torch.ones(1, dtype=torch.int32, device=device)
        torch._amp_update_scale_(scale, tracker, found, 2.0, 0.5, 2)
        return [g.cpu() for g in grads], found.cpu(), scale.cpu(), tracker.cpu()

    want = run("cpu")
    got = unserved_skips(lambda: run("infini"))
    assert got[1].item() == (0.0 if bad is None else 1.0)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, equal_nan=True, rtol=0, atol=0)


def test_twenty_bf16_autocast_steps_follow_the_cpu_loss_curve():
    cpu_model = mlp(1)
    model = copy.deepcopy(cpu_model).to(DEV)
    want, want_scales, _ = train(cpu_model, "cpu", 20, poison=set(), autocast_dtype=torch.bfloat16)
    got, got_scales, _ = unserved_skips(lambda: train(model, "infini", 20, poison=set(),
                                                      autocast_dtype=torch.bfloat16))
    assert got_scales == want_scales
    assert got[-1] < got[0]  # it trains
    # bfloat16 matmuls: the same policy on both sides (linear in bf16, mse_loss in fp32)
    torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=2e-2, atol=1e-3)
