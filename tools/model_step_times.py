"""Time per training step of every model of the model suite (tests/models/),
infini against CPU eager, in one process, interleaved: the suite's own step
(forward, cross_entropy, backward, clip_grad_norm_, AdamW), from the same
weights and data on both sides.

    python tools/model_step_times.py [--reps N] [--steps N] [model ...]

Prints one row per model: median seconds per step on each side and
infini / CPU. Figures from a busy machine mean nothing (the header prints the
load average); the model suite itself checks the values.
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "models"), str(ROOT / "tests")]

import torch  # noqa: E402

import torch_infini  # noqa: E402,F401
from test_model_suite import MODELS, _build, _on, _train_step  # noqa: E402


def _side(name: str, device: str):
    model, inputs = _build(name)
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    kwargs = _on(inputs(1), device)

    def run(steps: int) -> float:
        start = time.perf_counter()
        for _ in range(steps):
            _train_step(model, opt, kwargs, autocast=False)
        if device != "cpu":
            torch.infini.synchronize()
        return (time.perf_counter() - start) / steps

    run(2)  # warm-up: first calls, optimizer state
    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", help=f"default: all of {', '.join(sorted(MODELS))}")
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions per side")
    parser.add_argument("--steps", type=int, default=5, help="training steps per repetition")
    args = parser.parse_args()
    names = args.models or sorted(MODELS)
    print(f"load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {args.reps} x {args.steps} steps")
    print(f"{'model':14s} {'infini':>10s} {'cpu':>10s} {'ratio':>7s}")
    for name in names:
        infini, cpu = _side(name, "infini"), _side(name, "cpu")
        times = {"infini": [], "cpu": []}
        for _ in range(args.reps):
            times["infini"].append(infini(args.steps))
            times["cpu"].append(cpu(args.steps))
        a, b = statistics.median(times["infini"]), statistics.median(times["cpu"])
        print(f"{name:14s} {a * 1e3:8.2f}ms {b * 1e3:8.2f}ms {a / b:6.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
