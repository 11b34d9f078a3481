"""Timings, infini against PyTorch's own ``cuda`` in the same process
(timings.json).

    python tools/gpu_check/timings.py OUT_DIR [--budget S] [--reps 5]

Cases (each side warmed up once, then ``reps`` repetitions interleaved
infini, cuda, infini, ...; the median per call is reported):

- ``add1/sync``: ``torch.add`` of two one-element float32 tensors, then the
  device's ``synchronize()``; microseconds per call;
- ``add1/queued1000``: 1000 such adds, then one ``synchronize()``;
  milliseconds per 1000;
- ``mlp/forward``: 4 x (Linear(512, 512) + ReLU), batch 64, ``no_grad``, then
  ``synchronize()``; milliseconds (benchmarks/run.py's ``mlp`` case);
- ``gpt2/train_step``: one AdamW training step of gpt2.py's TinyGPT2 (batch
  2 x 32), then ``synchronize()``; milliseconds;
- ``matmul/bf16``: ``a @ b`` of two bfloat16 N x N matrices, N = 8192 where
  infini is an accelerator (else 256: InfiniRT's CPU backend would take
  minutes; the record says so), then ``synchronize()``; TFLOP/s.

A side that is absent (no CUDA device) or fails is recorded with its reason.
Where infini refuses an operator (the stack's InfiniOps lacks it), the case
is timed again with the CPU fallback on (``infini_with_cpu_fallback``; the
operators that ran on the CPU, with their calls over the case's runs, in
``infini_fallback_ops``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Callable

from common import (ResultFile, cuda_status, first_line, infini_is_accelerator, infini_status,
                    with_cpu_fallback)


def timed(fn: Callable[[], None], sync: Callable[[], None], calls: int) -> float:
    """Seconds per call of ``calls`` calls of ``fn``, then one sync."""
    sync()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    sync()
    return (time.perf_counter() - start) / calls


def calls_for(fn, sync, target_s: float) -> int:
    """How many calls make one repetition of about ``target_s`` (at least 1)."""
    once = timed(fn, sync, 1)
    return max(1, min(10000, int(target_s / max(once, 1e-7))))


def sides(make: Callable[[str], Callable[[], None]], devices: dict, reps: int, target_s: float) -> dict:
    """Median seconds per call for each usable device, interleaved."""
    bodies, syncs, calls, samples, out = {}, {}, {}, {}, {}
    for name, (ok, sync) in devices.items():
        if ok is not True:
            out[name] = ok
            continue
        try:
            bodies[name] = make(name)
            bodies[name]()  # warm-up (also the first-call costs)
            syncs[name] = sync
            calls[name] = calls_for(bodies[name], sync, target_s)
            samples[name] = []
        except Exception as error:  # noqa: BLE001
            out[name] = {"error": first_line(error)}
    for _ in range(reps):
        for name in list(samples):
            try:
                samples[name].append(timed(bodies[name], syncs[name], calls[name]))
            except Exception as error:  # noqa: BLE001
                out[name] = {"error": first_line(error)}
                del samples[name]
    for name, values in samples.items():
        out[name] = {"median_s": statistics.median(values), "min_s": min(values), "calls_per_rep": calls[name]}
    return out


def refused_side(record: dict, name: str) -> bool:
    """Whether ``name``'s side failed because the provider refused an operator."""
    value = record.get(name)
    return isinstance(value, dict) and str(value.get("error", "")).startswith("NotImplementedError") \
        and "TORCH_INFINI_CPU_FALLBACK" in value["error"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget", type=float, default=90)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--rep-s", type=float, default=0.05, help="target length of one repetition")
    args = parser.parse_args()
    result = ResultFile(args.out, "timings.json", "timings", args.budget)
    import torch
    from torch import nn

    import gpt2

    infini = result.step("infini", infini_status)
    cuda_ok, cuda_detail = cuda_status()
    devices = {"infini": (True, torch.infini.synchronize),
               "cuda": (True if cuda_ok else cuda_detail, torch.cuda.synchronize)}
    dev = {"infini": "infini:0", "cuda": "cuda:0"}
    accelerator = isinstance(infini, dict) and "error" not in infini and infini_is_accelerator(infini)
    result.update(cuda=cuda_detail, reps=args.reps)

    def add1(name):
        a = torch.ones(1, device=dev[name])
        return lambda: torch.add(a, a)

    def add1000(name):
        a = torch.ones(1, device=dev[name])

        def body():
            for _ in range(1000):
                torch.add(a, a)
        return body

    def mlp(name):
        torch.manual_seed(0)
        model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(512, 512), nn.ReLU())]).to(dev[name])
        x = torch.randn(64, 512, device=dev[name])

        def body():
            with torch.no_grad():
                model(x)
        return body

    def gpt2_step(name):
        base, tokens = gpt2.make_model_and_batch()
        model = base.to(dev[name])
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
        batch = tokens.to(dev[name])
        return lambda: gpt2.train_step(model, optimizer, batch)

    n = 8192 if accelerator else 256

    def matmul(name):
        g = torch.Generator().manual_seed(0)
        a = torch.randn(n, n, generator=g).to(torch.bfloat16).to(dev[name])
        b = torch.randn(n, n, generator=g).to(torch.bfloat16).to(dev[name])
        return lambda: a @ b

    cases = {}
    for case, make, unit, scale in (("add1/sync", add1, "us per call", 1e6),
                                    ("add1/queued1000", add1000, "ms per 1000 adds", 1e3),
                                    ("mlp/forward", mlp, "ms per forward", 1e3),
                                    ("gpt2/train_step", gpt2_step, "ms per step", 1e3),
                                    ("matmul/bf16", matmul, "TFLOP/s", None)):
        if result.left() < 5:
            cases[case] = "skipped: the part's time budget ran out"
            result.update(cases=cases)
            continue
        record = sides(make, devices, args.reps, args.rep_s)
        if refused_side(record, "infini"):
            # Named apart: a figure that leaned on the CPU is not infini's.
            again, ops = with_cpu_fallback(lambda: sides(make, {"infini": devices["infini"]}, args.reps, args.rep_s))
            record["infini_with_cpu_fallback"] = again["infini"]
            record["infini_fallback_ops"] = ops
        for side, value in record.items():
            if isinstance(value, dict) and "median_s" in value:
                value["value"] = (2 * n**3 / value["median_s"] / 1e12) if scale is None else value["median_s"] * scale
        record["unit"] = unit
        if case == "matmul/bf16":
            record["n"] = n
            if not accelerator:
                record["note"] = f"N={n}, not 8192: infini runs on {infini.get('backend') if isinstance(infini, dict) else '?'}"
        if all(isinstance(record.get(s), dict) and "value" in record[s] for s in ("infini", "cuda")):
            record["ratio_infini_over_cuda_time"] = record["infini"]["median_s"] / record["cuda"]["median_s"]
        cases[case] = record
        result.update(cases=cases)
    result.update(status="done")


if __name__ == "__main__":
    main()
