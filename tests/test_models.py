"""Real models on infini with native kernels only (the CPU fallback off): a
4-layer MLP trained one SGD step, and a Llama-style decoder block forward and
backward, against the same models on the CPU.

On the Infini stack a model whose operators InfiniOps does not all serve is
skipped with the first operator it lacks (the note of each release lists
them)."""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import torch_infini
from infini_testing import DEV, on_host, unserved_skips

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from models import DecoderBlock  # noqa: E402  (shared with the benchmarks)


@pytest.fixture(autouse=True)
def _native_only(native_only):
    """Everything native: the opt-in CPU fallback off."""


def sample(*shape: int, seed: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def tolerance() -> dict:
    # The host runs CPU's kernels; InfiniOps accumulates in its own order.
    return dict(rtol=1e-5, atol=1e-6) if on_host() else dict(rtol=1e-4, atol=1e-5)


def mlp() -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Linear(256, 256), nn.ReLU()]
    return nn.Sequential(*layers)


def test_mlp_forward_backward_and_sgd_step_match_cpu():
    cpu_model = mlp()
    model = copy.deepcopy(cpu_model).to(DEV)
    x, target = sample(16, 256, seed=1), sample(16, 256, seed=2)
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for step in range(2):  # the second step uses the momentum buffers
        cpu_opt.zero_grad()
        cpu_loss = nn.functional.mse_loss(cpu_model(x), target)
        cpu_loss.backward()
        cpu_opt.step()

        def device_step():
            opt.zero_grad()
            loss = nn.functional.mse_loss(model(x.to(DEV)), target.to(DEV))
            loss.backward()
            opt.step()
            return loss

        loss = unserved_skips(device_step)
        assert loss.device == DEV
        torch.testing.assert_close(loss.cpu(), cpu_loss.detach(), **tolerance())
    for (name, got), want in zip(model.named_parameters(), cpu_model.parameters()):
        assert got.device == DEV
        torch.testing.assert_close(got.grad.cpu(), want.grad, msg=name, **tolerance())
        torch.testing.assert_close(got.detach().cpu(), want.detach(), msg=name, **tolerance())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_decoder_block_forward_matches_cpu(dtype):
    torch.manual_seed(0)
    cpu_block = DecoderBlock().to(dtype).eval()
    block = copy.deepcopy(cpu_block).to(DEV)
    x = sample(2, 16, 64, seed=3).to(dtype)
    with torch.no_grad():
        want = cpu_block(x)
        got = unserved_skips(lambda: block(x.to(DEV)))
    tol = tolerance() if dtype == torch.float32 else dict(rtol=1.6e-2, atol=1e-2)
    assert got.device == DEV and got.dtype == dtype
    torch.testing.assert_close(got.cpu(), want, **tol)


def test_decoder_block_backward_matches_cpu():
    torch.manual_seed(0)
    cpu_block = DecoderBlock()
    block = copy.deepcopy(cpu_block).to(DEV)
    x = sample(2, 8, 64, seed=4)
    cpu_block(x).square().mean().backward()
    unserved_skips(lambda: block(x.to(DEV)).square().mean().backward())
    for (name, got), want in zip(block.named_parameters(), cpu_block.parameters()):
        torch.testing.assert_close(got.grad.cpu(), want.grad, msg=name, **tolerance())


def test_printing_a_device_tensor_matches_cpu():
    for x in (torch.randn(3, 4), torch.arange(6).view(2, 3), torch.zeros(2000), torch.tensor([1.0, float("nan")])):
        text = unserved_skips(lambda: repr(x.to(DEV)))
        assert text == repr(x)[:-1] + ", device='infini:0')"
