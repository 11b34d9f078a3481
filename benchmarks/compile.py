#!/usr/bin/env python
"""torch.compile on infini against eager infini and compiled CPU, in one run.

    python benchmarks/compile.py [--quick] [--json PATH] [--cases SUBSTR ...]

For the MLP and the decoder block (benchmarks/models.py), forward (no_grad)
and a training step (forward, backward, SGD step), three sides run in the
same process, interleaved (one repetition of each in turn, for several
repetitions): Inductor on infini, eager on infini, Inductor on CPU. Every side
is compiled and warmed up before timing; each infini repetition ends with
``torch.infini.synchronize()`` before the clock stops. The table shows the
median time per call of each side and two ratios: compiled infini / compiled
CPU (the target is at most 1.10) and compiled infini / eager infini.
Wall times on a machine shared with other work are noisy: the medians of
interleaved repetitions are what to compare, and the header prints the load
average.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Optional

import torch
from torch import nn

import torch_infini  # noqa: F401  (registers the device and the compiler backend)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from models import DecoderBlock  # noqa: E402

DEV = "infini"
TARGET = 1.10


def mlp() -> nn.Module:
    layers: list = []
    for _ in range(4):
        layers += [nn.Linear(512, 512), nn.ReLU()]
    return nn.Sequential(*layers)


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "mlp/4xLinear512+ReLU/b64": (mlp, (64, 512)),
    "decoder/llama-block/d64-h4/b4s32": (DecoderBlock, (4, 32, 64)),
}


def sync(device: str) -> None:
    if device == DEV:
        torch.infini.synchronize()


def side(build: Callable[[], nn.Module], shape: tuple[int, ...], device: str, compiled: bool,
         mode: str) -> tuple[Callable[[int], None], Callable[[], torch.Tensor]]:
    """One side of a case: a function running n calls, and one giving the
    output to check (the forward's output, or the first parameter after a
    step)."""
    torch.manual_seed(0)
    model = build().to(device)
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1)).to(device)
    fn = torch.compile(model) if compiled else model
    if mode == "forward":
        model.eval()

        def run(n: int) -> None:
            with torch.no_grad():
                for _ in range(n):
                    fn(x)
            sync(device)

        def output() -> torch.Tensor:
            with torch.no_grad():
                return fn(x).cpu()
    else:
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)

        def run(n: int) -> None:
            for _ in range(n):
                opt.zero_grad(set_to_none=True)
                fn(x).square().mean().backward()
                opt.step()
            sync(device)

        def output() -> torch.Tensor:
            return next(model.parameters()).detach().cpu()
    return run, output


def calibrate(run: Callable[[int], None], rep_s: float) -> int:
    n = 1
    while True:
        start = time.perf_counter()
        run(n)
        took = time.perf_counter() - start
        if took >= rep_s / 4 or n >= 1 << 14:
            return max(1, int(n * rep_s / max(took, 1e-9)))
        n *= 4


def bench(name: str, mode: str, reps: int, rep_s: float) -> dict:
    build, shape = MODELS[name]
    sides = {
        "compiled_infini": side(build, shape, DEV, True, mode),
        "eager_infini": side(build, shape, DEV, False, mode),
        "compiled_cpu": side(build, shape, "cpu", True, mode),
    }
    compile_s = {}
    for key, (run, _) in sides.items():  # compile and warm up
        start = time.perf_counter()
        run(2)
        compile_s[key] = time.perf_counter() - start
    check: Optional[str] = None
    outputs = {key: out() for key, (_, out) in sides.items()}
    for key in ("eager_infini", "compiled_cpu"):
        if not torch.allclose(outputs["compiled_infini"], outputs[key], rtol=1e-3, atol=1e-4):
            check = f"compiled infini differs from {key}"
    counts = {key: calibrate(run, rep_s) for key, (run, _) in sides.items()}
    times: dict[str, list[float]] = {key: [] for key in sides}
    for _ in range(reps):
        for key, (run, _) in sides.items():
            start = time.perf_counter()
            run(counts[key])
            times[key].append((time.perf_counter() - start) / counts[key])
    med = {key: statistics.median(ts) for key, ts in times.items()}
    return {"case": f"{name}/{mode}", **{f"{k}_s": v for k, v in med.items()},
            "ratio_vs_compiled_cpu": med["compiled_infini"] / med["compiled_cpu"],
            "ratio_vs_eager_infini": med["compiled_infini"] / med["eager_infini"],
            "first_calls_s": compile_s, "check": check}


def fmt(s: float) -> str:
    return f"{s * 1e6:9.1f} us" if s < 1e-3 else f"{s * 1e3:9.2f} ms"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter repetitions (about a minute)")
    parser.add_argument("--json", help="write the records to this path")
    parser.add_argument("--cases", nargs="*", default=[], help="run only cases whose name contains one of these")
    args = parser.parse_args()
    reps, rep_s = (5, 0.05) if args.quick else (15, 0.2)
    print(f"torch {torch.__version__}, provider {torch_infini._C._provider_info()['provider']}, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}, "
          f"torch threads {torch.get_num_threads()}; {reps} interleaved repetitions of ~{rep_s * 1e3:.0f} ms")
    header = f"{'case':44} {'compiled infini':>15} {'eager infini':>13} {'compiled cpu':>13} {'/cpu':>6} {'/eager':>7}"
    print(header)
    records = []
    failed = False
    for name in MODELS:
        for mode in ("forward", "train_step"):
            case = f"{name}/{mode}"
            if args.cases and not any(s in case for s in args.cases):
                continue
            r = bench(name, mode, reps, rep_s)
            records.append(r)
            flag = "" if r["ratio_vs_compiled_cpu"] <= TARGET else f"  (over {TARGET:.2f}x)"
            if r["check"]:
                flag += f"  CHECK FAILED: {r['check']}"
                failed = True
            print(f"{case:44} {fmt(r['compiled_infini_s']):>15} {fmt(r['eager_infini_s']):>13} "
                  f"{fmt(r['compiled_cpu_s']):>13} {r['ratio_vs_compiled_cpu']:6.2f} "
                  f"{r['ratio_vs_eager_infini']:7.2f}{flag}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(records, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
