"""Programs for ``python -m torch_infini coverage`` (docs/coverage.md): a
model of the model suite (tests/models/) for one forward pass and training
steps, or a compiled MLP.

    python -m torch_infini coverage --backend nvidia -- tools/coverage_programs.py llama
    python -m torch_infini coverage --backend ascend -- tools/coverage_programs.py resnet --steps 2
    python -m torch_infini coverage --backend cambricon -- tools/coverage_programs.py compiled-mlp

A model step is the suite's: cross_entropy, backward, clip_grad_norm_, then
AdamW (default foreach). The compiled MLP is the benchmarks' shape (Linear,
GELU, Linear) under ``torch.compile`` with its default backend, a forward
pass and a training step (SGD).
"""

from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "tests")]

import torch  # noqa: E402

import torch_infini  # noqa: E402,F401

DEV = torch.device("infini")


def model_steps(name: str, steps: int) -> None:
    import test_model_suite as suite

    model, inputs = suite._build(name)
    model = copy.deepcopy(model).to(DEV)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    kwargs = suite._on(inputs(2), DEV)
    with torch.no_grad():
        suite._loss(model.eval(), kwargs)
    model.train()
    for _ in range(steps):
        suite._train_step(model, opt, kwargs, autocast=False)
    torch.infini.synchronize()


def compiled_mlp(steps: int) -> None:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to(DEV)
    opt = torch.optim.SGD(mlp.parameters(), lr=0.01)
    compiled = torch.compile(mlp)
    x = torch.randn(32, 64).to(DEV)
    with torch.no_grad():
        compiled(x)
    for _ in range(steps):
        opt.zero_grad()
        compiled(x).square().mean().backward()
        opt.step()
    torch.infini.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("program", help="a model of tests/models/test_model_suite.py (llama, resnet, ...) "
                                        "or compiled-mlp")
    parser.add_argument("--steps", type=int, default=1, help="training steps (default 1)")
    args = parser.parse_args()
    if args.program == "compiled-mlp":
        compiled_mlp(args.steps)
    else:
        model_steps(args.program, args.steps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
