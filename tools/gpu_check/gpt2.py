"""The GPT-2-tiny training step on infini, on PyTorch's ``cuda`` and on CPU:
the losses of each step, and how far each device's are from CPU's (gpt2.json).

    python tools/gpu_check/gpt2.py OUT_DIR [--steps 3] [--budget S]

One model (benchmarks/models.py's TinyGPT2: 2 layers, width 64, 4 heads,
vocabulary 512, random weights drawn on the CPU) is copied to each device;
each takes the same batch (2 x 32 tokens) through ``steps`` AdamW steps
(forward, cross-entropy, backward, step). A device that is absent or fails
is recorded with its reason; the others still run. Where infini refuses an
operator (the stack's InfiniOps lacks it), the step runs again with the CPU
fallback on (``infini_with_cpu_fallback``), naming the operators that ran on
the CPU and their calls (``infini_fallback_ops``).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

from common import ResultFile, cuda_status, first_line, infini_status, refused, repo_root, with_cpu_fallback

sys.path.insert(0, str(repo_root() / "benchmarks"))


def make_model_and_batch():
    import torch
    from models import TinyGPT2

    torch.manual_seed(0)
    model = TinyGPT2()
    tokens = torch.randint(0, 512, (2, 32), generator=torch.Generator().manual_seed(1))
    return model, tokens


def train_step(model, optimizer, tokens):
    import torch.nn.functional as F

    optimizer.zero_grad(set_to_none=True)
    logits = model(tokens)
    loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), tokens[:, 1:].reshape(-1))
    loss.backward()
    optimizer.step()
    return loss


def losses_on(device: str, base, tokens, steps: int) -> list[float]:
    import torch

    model = copy.deepcopy(base).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batch = tokens.to(device)
    return [float(train_step(model, optimizer, batch).item()) for _ in range(steps)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--budget", type=float, default=60)
    args = parser.parse_args()
    result = ResultFile(args.out, "gpt2.json", "gpt2", args.budget)
    import torch

    infini = result.step("infini", infini_status)
    cuda_ok, cuda_detail = cuda_status()
    base, tokens = make_model_and_batch()
    result.update(model="TinyGPT2(vocab=512, dim=64, layers=2, heads=4)", batch=list(tokens.shape), steps=args.steps,
                  optimizer="AdamW(lr=1e-3)")
    losses = {}
    for device in ("cpu", "infini", "cuda"):
        if device == "cuda" and not cuda_ok:
            losses[device] = cuda_detail
        else:
            try:
                losses[device] = losses_on(device if device != "infini" else "infini:0", base, tokens, args.steps)
            except Exception as error:  # noqa: BLE001  (recorded; the other devices still run)
                losses[device] = {"error": first_line(error)}
                if device == "infini" and refused(error):
                    try:
                        losses["infini_with_cpu_fallback"], ops = with_cpu_fallback(
                            lambda: losses_on("infini:0", base, tokens, args.steps))
                        result.update(infini_fallback_ops=ops)
                    except Exception as again:  # noqa: BLE001
                        losses["infini_with_cpu_fallback"] = {"error": first_line(again)}
        result.update(losses=losses)
    diffs = {d: max(abs(a - b) for a, b in zip(v, losses["cpu"])) for d, v in losses.items()
             if d != "cpu" and isinstance(v, list) and isinstance(losses["cpu"], list)}
    result.update(max_abs_diff_from_cpu=diffs, infini_backend=infini.get("backend") if isinstance(infini, dict) else None,
                  torch=torch.__version__, status="done")


if __name__ == "__main__":
    main()
