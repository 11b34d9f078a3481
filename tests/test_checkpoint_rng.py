"""torch.infini._initialized, and what reads it: torch.utils.checkpoint saves
and restores the device's RNG state only when the device module says it is
initialized, so that the recomputed forward draws the same dropout masks.
Without it, checkpointed dropout computes wrong gradients (silently).
"""

from __future__ import annotations

import pytest
import torch
import torch.utils.checkpoint

from conftest import run_python


def test_initialized_follows_is_initialized_in_a_fresh_process():
    proc = run_python(
        """
        import torch, torch_infini
        print("BEFORE", torch.infini._initialized, torch.infini.is_initialized())
        torch.ones(2, device="infini")
        print("AFTER", torch.infini._initialized, torch.infini.is_initialized())
        """
    )
    assert proc.returncode == 0, proc.stderr
    assert "BEFORE False False" in proc.stdout
    assert "AFTER True True" in proc.stdout


def test_initialized_is_a_live_bool_here(device):
    torch.ones(1, device=device)
    assert torch.infini._initialized is True
    assert "_initialized" not in torch.infini.__all__


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = torch.nn.Linear(32, 32)
        self.drop = torch.nn.Dropout(p=0.5)
        self.outer = torch.nn.Linear(32, 8)

    def layer(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.inner(x)))

    def forward(self, x: torch.Tensor, checkpoint: str) -> torch.Tensor:
        if checkpoint == "none":
            h = self.layer(x)
        else:
            h = torch.utils.checkpoint.checkpoint(self.layer, x, use_reentrant=checkpoint == "reentrant")
        return self.outer(h)


def _gradients(block: Block, x: torch.Tensor, checkpoint: str, seed: int) -> list[torch.Tensor]:
    block.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_(True)
    torch.manual_seed(seed)
    block(x, checkpoint).square().sum().backward()
    return [x.grad.cpu()] + [p.grad.cpu() for p in block.parameters()]


@pytest.mark.parametrize("checkpoint", ["reentrant", "non_reentrant"])
def test_checkpointed_dropout_gives_the_gradients_of_the_plain_run(device, rng_states_kept, checkpoint):
    torch.manual_seed(0)
    block = Block().to(device)
    x = torch.randn(16, 32).to(device)
    for seed in (1, 2, 3):
        expected = _gradients(block, x, "none", seed)
        got = _gradients(block, x, checkpoint, seed)
        for e, g in zip(expected, got):
            # The same masks and the same kernels: equal, not merely close.
            torch.testing.assert_close(g, e, rtol=0, atol=0)
