#!/usr/bin/env python
"""Which InfiniOps implementation of an operator is faster on this backend: native or ATen-backed.

    python benchmarks/implementations.py [--quick] [--ops Add Mul ...] [--write] [--json PATH]

InfiniOps built ``WITH_TORCH=ON`` has, for some operators, a native kernel
and an ATen-backed implementation on the same backend. For each operator of
``OPERATORS`` and a few output sizes, this script forces each kind in turn
(``torch_infini._C._set_implementation_preferences``: the data the
implementation choice reads), interleaved repetition by repetition in one
process, and times one call + ``synchronize()``; both kinds' results are
checked against CPU eager first. It prints per size the median time of each
kind, native / ATen-backed, and the faster one.

``--write`` stores the answer for the provider's backend in
``torch_infini/data/implementation_speed.json`` (other backends' entries are
kept), which torch_infini loads at import (torch_infini/_implementations.py):
per operator, size classes of the faster kind, adjacent sizes with the same
answer merged, a class ending where native / ATen-backed crosses 1 between
two measured sizes (interpolated). Sizes whose two kinds are within ``TIE``
of each other go to the backend's default, ATen-backed (ATen's kernel gives
CPU eager's results bit for bit). A native answer holds only for the output
dtypes where the native kernel gives CPU eager's results bit for bit
(:func:`exact_dtypes`: each of ``DTYPES``, on the operator's call forms at
its smallest sizes); the speed is measured in float32, so where float32 is
not among them the answer is ATen-backed. Forcing a kind the build lacks
for an operator runs the other one: both timings then agree, and the
default is recorded.

Run it on an idle machine: the header gives the load average, and the run
says ``BUSY`` (and ``--write`` refuses) when the 1-minute load is at or
above 0.5, unless ``--force``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import json
import math
import platform
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))
import run  # noqa: E402  (MachineLoad, fmt_s, usable_cores)

import torch  # noqa: E402

import torch_infini  # noqa: E402
from torch_infini import _implementations, backend_support  # noqa: E402

TIE = 0.05  # within 5%: no measurable difference
DEFAULT_KIND = "aten"
DEV = torch.device("infini:0")


@dataclass
class Operator:
    """An InfiniOps operator with both kinds on some backend, and how to call it."""

    name: str  # InfiniOps' class name, as the choice looks it up
    call: str  # what one call is
    # Inputs on the CPU for an output of about `numel` elements, and the call.
    inputs: Callable[[int], tuple]
    fn: Callable[..., Any]
    sizes: tuple[int, ...]
    # More calls whose results the native kernel must give bit for bit (a
    # Python number operand: read in the compute dtype by CPU's kernel).
    forms: tuple[Callable[..., Any], ...] = ()
    # Whether the output's size bounds the work, so that size classes may
    # choose by it. Not for a matmul: a 1x1 output can sum a million
    # products, which the native kernel (a plain triple loop) would take
    # milliseconds over; its answer is its largest measured size's, for
    # every size.
    sized_by_output: bool = True


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


def _square(numel: int) -> int:
    return max(1, round(numel ** 0.5))


ELEMENTWISE = (1, 1 << 8, 1 << 10, 1 << 12, 1 << 15, 1 << 20)

OPERATORS = [
    Operator("Add", "torch.add(a, b)", lambda n: (_randn(n), _randn(n)), torch.add, ELEMENTWISE,
             forms=(lambda a, b: a + 0.1,)),
    Operator("Mul", "torch.mul(a, b)", lambda n: (_randn(n), _randn(n)), torch.mul, ELEMENTWISE,
             forms=(lambda a, b: a * 0.1,)),
    Operator("Relu", "torch.relu(a)", lambda n: (_randn(n),), torch.relu, ELEMENTWISE),
    Operator("Silu", "F.silu(a)", lambda n: (_randn(n),), torch.nn.functional.silu, ELEMENTWISE),
    Operator("Cat", "torch.cat([a, b])", lambda n: (_randn(max(1, n // 2)), _randn(max(1, n // 2))),
             lambda a, b: torch.cat([a, b]), ELEMENTWISE),
    # Output n x n: 1, 32x32, 128x128, 256x256 (the native kernel is a plain
    # triple loop: larger sizes take seconds).
    Operator("Gemm", "torch.mm(a, b)", lambda n: (_randn(_square(n), _square(n)), _randn(_square(n), _square(n))),
             torch.mm, (1, 1 << 10, 1 << 14, 1 << 16), sized_by_output=False),
]


#: The output dtypes a native answer may hold for, each checked bit for bit.
DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")
MEASURED_DTYPE = "float32"  # the dtype the timings are taken in


def _force(base: list, backend: str, op: str, kind: str) -> None:
    rows = [r for r in base if not (r[0] == backend and r[1] == op)] + [(backend, op, -1, kind, ())]
    torch_infini._C._set_implementation_preferences(rows)


def _elapsed(fn: Callable[[], Any], n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    torch.infini.synchronize()
    return (time.perf_counter() - t0) / n


def _calls_per_rep(fn: Callable[[], Any], target_s: float) -> int:
    n = 1
    while True:
        dt = _elapsed(fn, n) * n
        if dt >= target_s / 4 or n >= 1 << 16:
            return max(1, int(n * target_s / max(dt, 1e-9)))
        n *= 4


def measure(op: Operator, numel: int, backend: str, base: list, reps: int, target_s: float) -> dict:
    """Median seconds per call of each kind for one size, interleaved."""
    cpu = op.inputs(numel)
    dev = tuple(t.to(DEV) for t in cpu)
    expected = op.fn(*cpu)
    calls: dict[str, Callable[[], Any]] = {}
    counts: dict[str, int] = {}
    for kind in ("native", "aten"):
        _force(base, backend, op.name, kind)
        got = op.fn(*dev).cpu()
        torch.testing.assert_close(got, expected, msg=lambda m, k=kind: f"{op.name} ({k}) differs from CPU: {m}")
        calls[kind] = lambda: op.fn(*dev)
        counts[kind] = _calls_per_rep(calls[kind], target_s)
    times: dict[str, list[float]] = {"native": [], "aten": []}
    gc.collect()
    gc.disable()
    try:
        for _ in range(reps):
            for kind in ("native", "aten"):
                _force(base, backend, op.name, kind)
                times[kind].append(_elapsed(calls[kind], counts[kind]))
    finally:
        gc.enable()
        torch_infini._C._set_implementation_preferences(base)
    native, aten = (statistics.median(times[k]) for k in ("native", "aten"))
    if abs(native - aten) <= TIE * min(native, aten):
        faster = DEFAULT_KIND
    else:
        faster = "native" if native < aten else "aten"
    return {"numel": int(expected.numel()), "native_s": native, "aten_s": aten, "faster": faster}


def exact_dtypes(op: Operator, backend: str, base: list) -> list[str]:
    """The dtypes of ``DTYPES`` where the native kernel, forced, gives CPU
    eager's results bit for bit (NaNs where CPU's are) for each call form at
    the operator's three smallest sizes, inputs scaled by 3 and cast (so
    that integers vary). A dtype CPU eager refuses is left out."""
    exact = []
    _force(base, backend, op.name, "native")
    try:
        for name in DTYPES:
            dtype = getattr(torch, name)
            ok = True
            for numel in op.sizes[:3]:
                cpu = tuple((t * 3).to(dtype) for t in op.inputs(numel))
                dev = tuple(t.to(DEV) for t in cpu)
                for fn in (op.fn, *op.forms):
                    try:
                        expected = fn(*cpu)
                        got = fn(*dev).cpu()
                        torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
                    except Exception:  # CPU refuses, or the results differ
                        ok = False
                        break
                if not ok:
                    break
            if ok:
                exact.append(name)
    finally:
        torch_infini._C._set_implementation_preferences(base)
    return exact


def with_exact_dtypes(classes: list[dict], exact: list[str]) -> list[dict]:
    """Each native class limited to ``exact``; ATen-backed where the measured
    dtype is not exact (then adjacent equal answers merged again)."""
    out: list[dict] = []
    for c in classes:
        c = dict(c)
        if c["faster"] == "native":
            if MEASURED_DTYPE in exact:
                c["dtypes"] = list(exact)
            else:
                c["faster"] = DEFAULT_KIND
        if out and out[-1]["faster"] == c["faster"] == DEFAULT_KIND:
            out[-1]["below"] = c["below"]
        else:
            out.append(c)
    return out


def crossover(a: dict, b: dict) -> int:
    """Where the class of measured size ``a`` ends, below the next measured
    size ``b``: where native / ATen-backed crosses 1 between them,
    interpolated on the logarithms of both (times per call grow about
    linearly with size past a fixed cost, so the ratio moves smoothly);
    ``b``'s size where the two answers differ only by a tie."""
    ra, rb = (math.log(r["native_s"] / r["aten_s"]) for r in (a, b))
    if a["faster"] == b["faster"] or ra * rb >= 0:
        return b["numel"]
    la, lb = math.log(a["numel"]), math.log(b["numel"])
    return min(b["numel"], max(a["numel"] + 1, round(math.exp(la + (lb - la) * ra / (ra - rb)))))


def size_classes(results: list[dict], sized_by_output: bool = True) -> list[dict]:
    """Rows of the data file: the faster kind per size class, a class
    reaching up to where the next measured size's answer takes over
    (:func:`crossover`), adjacent equal answers merged. An operator not
    sized by its output has one class, its largest measured size's."""
    if not sized_by_output:
        return [{"below": None, "faster": results[-1]["faster"]}]
    classes: list[dict] = []
    for i, r in enumerate(results):
        below = crossover(r, results[i + 1]) if i + 1 < len(results) else None
        if classes and classes[-1]["faster"] == r["faster"]:
            classes[-1]["below"] = below
        else:
            classes.append({"below": below, "faster": r["faster"]})
    return classes


def write(backend: str, measured: dict, answers: dict[str, list[dict]], timings: dict[str, list[dict]],
          path: Path) -> None:
    """Stores the answers of one backend, keeping the operators this run did
    not measure and the other backends' entries."""
    data = _implementations.load(path) if path.is_file() else {"format": _implementations.FORMAT, "backends": {}}
    data["what"] = ("Which InfiniOps implementation kind runs faster, per InfiniRT backend, operator and output "
                    "size (elements; 'below': the class holds outputs smaller than it, null: any size); "
                    "a native class holds for its 'dtypes' only, where the native kernel gave CPU eager's "
                    "results bit for bit (other dtypes take the default). "
                    "Written by benchmarks/implementations.py --write; read by torch_infini/_implementations.py.")
    entry = data["backends"].setdefault(backend, {})
    entry["default"] = DEFAULT_KIND
    entry["default_reason"] = ("operators not measured here: ATen-backed, as every measured one of this backend "
                               "where the two differ, and bit-identical to CPU eager")
    entry.setdefault("operators", {}).update(
        {op: [dict(c) for c in classes] for op, classes in answers.items()})
    entry.setdefault("measured", {}).update({op: dict(measured, timings=timings[op]) for op in answers})
    entry["operators"] = dict(sorted(entry["operators"].items()))
    entry["measured"] = dict(sorted(entry["measured"].items()))
    _implementations.rows(data)  # what the loader would refuse is never written
    path.write_text(json.dumps(data, indent=1) + "\n")


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 repetitions of ~5 ms (default 7 of ~20 ms)")
    parser.add_argument("--ops", nargs="*", help="only these InfiniOps operators (e.g. Mul Gemm)")
    parser.add_argument("--write", action="store_true", help="store the answer in " + str(_implementations.DATA))
    parser.add_argument("--force", action="store_true", help="--write even when the machine is busy")
    parser.add_argument("--json", help="write every timing to this file")
    args = parser.parse_args(argv)
    load = run.MachineLoad()
    info = torch_infini._C._provider_info()
    if info["provider"] != "infini":
        print(f"implementations.py: the provider is {info['provider']!r}: only the Infini stack has "
              "InfiniOps implementations to choose between", file=sys.stderr)
        return 2
    backend = info["backend"]
    reps, target_s = (3, 0.005) if args.quick else (7, 0.02)
    cores = run.usable_cores()
    print(f"{platform.platform()}; {run.cpu_model()}; {cores} usable cores; torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads; InfiniOps pin {backend_support.CURRENT_PIN}")
    print(f"backend {backend}; {load.line(cores)}")
    base = _implementations.current()
    answers: dict[str, list[dict]] = {}
    timings: dict[str, list[dict]] = {}
    print(f"\n{'operator':10s} {'output':>9s} {'native':>10s} {'ATen-backed':>12s} {'native/ATen':>12s}  faster")
    for op in OPERATORS:
        if args.ops and op.name not in args.ops:
            continue
        results = [measure(op, n, backend, base, reps, target_s) for n in op.sizes]
        for r in results:
            print(f"{op.name:10s} {r['numel']:9d} {run.fmt_s(r['native_s']):>10s} {run.fmt_s(r['aten_s']):>12s} "
                  f"{r['native_s'] / r['aten_s']:11.2f}x  {r['faster']}")
        classes = size_classes(results, op.sized_by_output)
        if any(c["faster"] == "native" for c in classes):
            exact = exact_dtypes(op, backend, base)
            print(f"{op.name:10s} native exactly as CPU eager in: {', '.join(exact) or 'no dtype'}")
            classes = with_exact_dtypes(classes, exact)
        answers[op.name] = classes
        timings[op.name] = [dict(r, call=op.call) for r in results]
    others = load.others_cores()
    print(f"\nMedians of {reps} interleaved repetitions of ~{target_s * 1e3:g} ms, one call + synchronize(); "
          f"other processes used {others if others is not None else float('nan'):.2f} cores meanwhile.")
    if args.json:
        Path(args.json).write_text(json.dumps(timings, indent=1) + "\n")
    if args.write:
        if load.busy() and not args.force:
            print("not written: the machine was busy (--force writes anyway)", file=sys.stderr)
            return 1
        measured = {"date": _dt.date.today().isoformat(), "torch": torch.__version__,
                    "infini_ops_pin": backend_support.CURRENT_PIN,
                    "machine": f"{run.cpu_model()}, {cores} usable cores",
                    "load_average": [round(x, 2) for x in (load.before or ())],
                    "others_cores": None if others is None else round(others, 2),
                    "command": "python benchmarks/implementations.py" + (" --quick" if args.quick else "")}
        write(backend, measured, answers, timings, _implementations.DATA)
        print(f"written: {_implementations.DATA}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
