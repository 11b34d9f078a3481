#!/usr/bin/env python
"""Where the time of one small call goes, per provider.

    python benchmarks/percall.py [--providers host infini] [--ops add mul softmax mm layer_norm layer_norm_backward mul_]
                                 [--no-callgrind] [--json PATH]

For a one-element ``add``, ``mul`` and ``softmax``, a 64x64 ``mm`` and a
[2, 12, 32] ``layer_norm`` and its backward (one call + ``synchronize()``;
on the Infini stack each is a decomposition), and ``mul_`` of 32 elements by a
Python number (as optimizers call it per parameter: PyTorch's ``mul_.Scalar``
calls ``mul.out`` with the number wrapped), on each provider this build can
select:

* **time per call** against CPU eager, the two interleaved repetition by
  repetition in one process (a fresh one per provider), with the load
  average before each run: wall times on a shared machine are noisy, the
  ratio less so;
* **a breakdown** of one call from ``valgrind --tool=callgrind``: the
  process runs the call ``N`` and ``N + CALLGRIND_EXTRA`` times (instruments
  on only around the loop, ``callgrind_control -i on``), and the difference
  divided by ``CALLGRIND_EXTRA`` is one call's instructions, repeatable
  under load. A function matching a part's pattern (``PARTS``) runs in that
  part, any other in its callers' parts (see :func:`parts_of_profile`). The parts:
  PyTorch's dispatch to our kernel (what is left), our key/plan lookup,
  meta run and output allocation, marshalling into InfiniOps' types, the
  InfiniOps call (its wrapper; the compute below it is "kernel"), the
  kernel, and queueing and synchronization. Instructions become
  microseconds at the call's own measured rate (time per call / its
  instructions), a uniform-IPC estimate: read the instruction counts for
  comparisons.

Rerun it before and after a change to the hot path and compare the parts.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Optional

HERE = Path(__file__).resolve().parent
CALLGRIND_BASE = 200  # calls in the shorter run
CALLGRIND_EXTRA = 400  # more calls in the longer one
TOP_FUNCTIONS = 8  # per part, in the JSON (and printed with --top)

# The ops: (name, setup code making CPU tensors a (and b), the call on x (and y)).
OPS = {
    "add": ("a, b = torch.randn(1), torch.randn(1)", "torch.add(x, y)"),
    "mul": ("a, b = torch.randn(1), torch.randn(1)", "torch.mul(x, y)"),
    "softmax": ("a = b = torch.randn(1)", "torch.softmax(x, -1)"),
    "mm": ("a, b = torch.randn(64, 64), torch.randn(64, 64)", "torch.mm(x, y)"),
    # An operator InfiniOps lacks: on the Infini stack, its decomposition
    # (recorded once, then replayed: csrc/ops/aten/decomposition_replay.h).
    "layer_norm": ("a, b = torch.randn(2, 12, 32), torch.randn(32)",
                   "torch.nn.functional.layer_norm(x, (32,), y, y)"),
    # Its gradient, as a transformer's backward calls it (a decomposition on
    # the Infini stack too); the mean and rstd are views of x.
    "layer_norm_backward": ("a, b = torch.randn(2, 12, 32), torch.randn(32)",
                            "torch.ops.aten.native_layer_norm_backward(x, x, (32,), x[..., :1], x[..., 1:2], y, y, "
                            "[True, True, True])"),
    # In place by a Python number, as optimizers call it per parameter
    # (PyTorch's mul_.Scalar calls mul.out with the number wrapped).
    "mul_": ("a = b = torch.randn(32)", "x.mul_(0.999)"),
}

# Parts of a call, innermost first: a function (callgrind's name, with its
# arguments) is counted in the first part whose pattern matches it. The
# patterns name our functions (csrc/) and the libraries' entry points.
PARTS = [
    ("kernel", r"at::native::|at::vec::|mkl_|sgemm|cblas_|(?<!torch_)infini::ops::.*::Compute<"),
    ("InfiniOps call", r"(?<!torch_)infini::ops::|infini::rt::"),
    ("profiler guards", r"RecordFunction|rebuildActiveCallbacks|rebuild_scope"),
    ("marshalling", r"torch_infini::runtime::infini::binding_detail::(Convert|tensor_of|append_key)|"
                    r"torch_infini::runtime::infini::(view_of|arg_of|expanded)|DeviceScalars"),
    ("checks and choice", r"torch_infini::runtime::infini::(GenericServer::choose|\(anonymous namespace\)::"
                          r"(common_reason|cpu_scalar_reason|native_reason|generic_native_reason|"
                          r"resizes_outputs_in_passing|with_results|each_tensor)|.*InfiniKernels::decide|"
                          r".*InfiniKernels::aten_unsupported)|torch_infini::runtime::(bool_operands|has_bool)"),
    # The layout cache is torch_infini::runtime's since the provider's strategy moved there.
    ("key/plan lookup", r"torch_infini::(ops|runtime)::.*(plan|Plan|layout|Layout|cache|Cache|key|Key|find_)|"
                        r"OperatorCache|scalar_cache"),
    ("meta and outputs", r"torch_infini::ops::.*(meta|Meta)|MetaRun|Meta::|InfiniAllocator|"
                         r"torch_infini::.*(allocate|empty_)|at::detail::empty_generic"),
    ("decomposition replay", r"torch_infini::ops::(ReplayProgram|replay_|find_replay|\(anonymous namespace\)::append_)"),
    ("queue and sync", r"torch_infini::runtime::host::HostStream::|torch_infini::.*synchronize|"
                       r"InfiniProvider::stream_synchronize|spin_until"),
    ("our kernel", r"torch_infini::"),
]

DRIVER = r"""
import os, subprocess, sys, time
import torch, torch_infini
op, calls, callgrind = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
SETUP, CALL = {ops}[op]
exec(SETUP)
on_cpu = os.environ.get("PERCALL_CPU") == "1"
x, y = (a, b) if on_cpu else (a.to("infini"), b.to("infini"))
sync = (lambda: None) if on_cpu else torch.infini.synchronize
f = eval("lambda x, y: " + CALL)
for _ in range(50):
    f(x, y); sync()
if callgrind:
    # Instruments on from here: callgrind answers between guest instructions,
    # so this thread polls instead of blocking in waitpid.
    ctl = subprocess.Popen(["callgrind_control", "-i", "on", str(os.getpid())], stdout=subprocess.DEVNULL)
    while ctl.poll() is None:
        pass
for _ in range(calls):
    f(x, y); sync()
"""


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f}"


def timing(provider: str, ops: list[str], reps: int) -> dict:
    """Seconds per call on infini (call + synchronize) and on CPU eager,
    interleaved, in a fresh process with ``provider``."""
    code = r"""
import json, statistics, sys, time, gc
import torch, torch_infini
ops, reps = json.loads(sys.argv[1]), int(sys.argv[2])
info = torch_infini._C._provider_info()
out = {"provider": info["provider"], "backend": info["backend"], "ops": {}}
sync = torch.infini.synchronize
def rep(fn, x, y, n, dev):
    t0 = time.perf_counter()
    for _ in range(n):
        fn(x, y)
        if dev:
            sync()
    return (time.perf_counter() - t0) / n
for name in ops:
    setup, call = OPS[name]
    env = {"torch": torch}
    exec(setup, env)
    a, b = env["a"], env["b"]
    x, y = a.to("infini"), b.to("infini")
    fn = eval("lambda x, y: " + call, {"torch": torch})
    for _ in range(200):
        fn(x, y); sync(); fn(a, b)
    n = 2000 if name != "mm" else 500
    gc.disable()
    t_inf, t_cpu = [], []
    for _ in range(reps):
        t_inf.append(rep(fn, x, y, n, True))
        t_cpu.append(rep(fn, a, b, n, False))
    gc.enable()
    out["ops"][name] = {"infini_s": statistics.median(t_inf), "cpu_s": statistics.median(t_cpu)}
print("RESULT" + json.dumps(out))
""".replace("OPS[name]", json.dumps(OPS) + "[name]")
    env = dict(os.environ, TORCH_INFINI_PROVIDER=provider)
    before = load_average()
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(ops), str(reps)], env=env,
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{provider}: {proc.stderr.strip().splitlines()[-1:]}")
    result = json.loads(proc.stdout.split("RESULT")[-1])
    result["load_before"], result["load_after"] = before, load_average()
    return result


def _bare(name: str) -> str:
    """A function's qualified name without its parameter list (patterns
    must not match a parameter's type); template arguments are kept."""
    depth = 0
    for i, c in enumerate(name):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "(" and depth == 0 and not name.startswith("(anonymous namespace)", i):
            return name[:i]
    return name


def _part_of(name: str) -> Optional[str]:
    bare = _bare(name)
    for part, pattern in PARTS:
        if re.search(pattern, bare):
            return part
    return None


def parts_of_profile(path: Path, by_function: Optional[dict] = None) -> dict[str, float]:
    """Instructions per part in a callgrind output (one event: Ir).

    A function matching a part's pattern runs in that part; any other
    function runs in the parts of its callers, shared in proportion to the
    instructions each call brought it (callgrind's call edges, inclusive).
    Every function's own instructions then go to its parts; what runs in no
    part (Python, PyTorch's dispatcher, the interpreter's loop) is
    "PyTorch dispatch and Python". ``by_function``, if given, receives each
    (part, function)'s instructions."""
    names: dict[str, str] = {}
    own: dict[str, int] = {}
    calls: dict[str, dict[str, int]] = {}  # callee -> caller -> inclusive instructions
    fn = callee = None
    pending_call = False

    def name_of(token: str) -> str:
        m = re.match(r"\((\d+)\)(?:\s+(.*))?", token)
        if not m:
            return token
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), token)

    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith("fn="):
                fn = name_of(line[3:].strip())
                own.setdefault(fn, 0)
            elif line.startswith("cfn="):
                callee = name_of(line[4:].strip())
            elif line.startswith("calls="):
                pending_call = True
            elif line[:1].isdigit() or line[:1] in "+-*":
                fields = line.split()
                cost = int(fields[1]) if len(fields) > 1 else 0
                if pending_call:
                    edges = calls.setdefault(callee, {})
                    edges[fn] = edges.get(fn, 0) + cost
                    pending_call = False
                elif fn is not None:
                    own[fn] += cost
    labels = [p for p, _ in PARTS] + ["PyTorch dispatch and Python"]
    context: dict[str, dict[str, float]] = {}
    inheriting = []
    for name in own:
        part = _part_of(name)
        context[name] = {part: 1.0} if part else {"PyTorch dispatch and Python": 1.0}
        if part is None and name in calls:
            inheriting.append(name)
    # Uncategorized functions take their callers' parts; a few sweeps settle
    # call chains (deeper chains converge the same way).
    for _ in range(30):
        changed = False
        for name in inheriting:
            mix: dict[str, float] = {}
            edges = calls[name]
            weight = sum(edges.values()) or 1
            for caller, cost in edges.items():
                for label, share in context.get(caller, {"PyTorch dispatch and Python": 1.0}).items():
                    mix[label] = mix.get(label, 0.0) + share * cost / weight
            if any(abs(mix.get(k, 0.0) - context[name].get(k, 0.0)) > 1e-9 for k in mix.keys() | context[name]):
                context[name], changed = mix, True
        if not changed:
            break
    totals = {label: 0.0 for label in labels}
    for name, cost in own.items():
        for label, share in context[name].items():
            totals[label] += cost * share
            if by_function is not None:
                by_function[(label, name)] = by_function.get((label, name), 0.0) + cost * share
    return totals


def _callgrind_run(provider: str, op: str, calls: int, out: Path,
                   by_function: Optional[dict] = None) -> dict[str, float]:
    """``provider`` "cpu": the same loop on CPU eager tensors."""
    env = dict(os.environ, TORCH_INFINI_PROVIDER=provider if provider != "cpu" else "auto",
               PERCALL_CPU="1" if provider == "cpu" else "0")
    driver = DRIVER.replace("{ops}", json.dumps(OPS))
    cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
           sys.executable, "-c", driver, op, str(calls), "1"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"callgrind {provider} {op}: {proc.stderr.strip().splitlines()[-1:]}")
    return parts_of_profile(out, by_function)


def breakdown(provider: str, op: str, tmp: Path, pool: Optional[ThreadPoolExecutor] = None) -> dict:
    """One call's instructions per part: the difference of two runs
    (``CALLGRIND_EXTRA`` more calls in the second), per call."""
    fs: dict = {}
    fl: dict = {}
    runs = [(CALLGRIND_BASE, "short", fs), (CALLGRIND_BASE + CALLGRIND_EXTRA, "long", fl)]
    jobs = [(pool.submit if pool else _now)(_callgrind_run, provider, op, n, tmp / f"{provider}-{op}-{tag}.out", d)
            for n, tag, d in runs]
    short, long = (job.result() for job in jobs)
    parts = {label: (long[label] - short.get(label, 0.0)) / CALLGRIND_EXTRA for label in long}
    functions = sorted((((fl[k] - fs.get(k, 0.0)) / CALLGRIND_EXTRA, k) for k in fl), reverse=True)
    top: dict = {}
    for cost, (label, name) in functions:
        if cost >= 5 and len(top.setdefault(label, [])) < TOP_FUNCTIONS:
            top[label].append((name[:160], round(cost)))
    return {"instructions": sum(parts.values()), "parts": parts, "top_functions": top}


class _now:
    """A finished job (no pool)."""

    def __init__(self, fn, *args) -> None:
        self._value = fn(*args)

    def result(self):
        return self._value


@contextlib.contextmanager
def _workdir(keep: Optional[str]):
    if keep:
        os.makedirs(keep, exist_ok=True)
        yield keep
    else:
        with tempfile.TemporaryDirectory() as tmp:
            yield tmp


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--providers", nargs="+", default=["host", "infini"])
    parser.add_argument("--ops", nargs="+", default=list(OPS), choices=list(OPS))
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--no-callgrind", action="store_true", help="time per call only")
    parser.add_argument("--top", action="store_true", help="print each part's costliest functions")
    parser.add_argument("--keep", metavar="DIR", help="keep callgrind's outputs in DIR")
    parser.add_argument("--jobs", type=int, default=2, help="callgrind runs at once (default 2)")
    parser.add_argument("--no-floor", action="store_true", help="skip CPU eager's instruction counts")
    parser.add_argument("--json", help="write the results to this file")
    args = parser.parse_args(argv)
    if not args.no_callgrind and shutil.which("valgrind") is None:
        parser.error("valgrind is not installed: pass --no-callgrind")
    results = []
    pool = ThreadPoolExecutor(max_workers=args.jobs)
    if not args.no_callgrind and not args.no_floor:
        with _workdir(args.keep) as tmp:
            floor = {op: breakdown("cpu", op, Path(tmp), pool)["instructions"] for op in args.ops}
        print("CPU eager, instructions per call (callgrind): "
              + ", ".join(f"{op} {n:.0f}" for op, n in floor.items()))
        results.append({"provider": "cpu eager", "instructions": floor})
    for provider in args.providers:
        try:
            result = timing(provider, args.ops, args.reps)
        except RuntimeError as exc:
            print(f"{provider}: cannot run ({exc})")
            continue
        if result["provider"] != provider:
            print(f"{provider}: not selectable in this build (got {result['provider']})")
            continue
        print(f"\nprovider {provider} (backend {result['backend']}); load average {result['load_before']} before, "
              f"{result['load_after']} after the timing")
        print(f"{'op':8s} {'infini':>10s} {'CPU eager':>10s} {'ratio':>7s}")
        for op in args.ops:
            t = result["ops"][op]
            print(f"{op:8s} {t['infini_s'] * 1e6:8.2f}us {t['cpu_s'] * 1e6:8.2f}us {t['infini_s'] / t['cpu_s']:6.2f}x")
        if not args.no_callgrind:
            with _workdir(args.keep) as tmp:
                for op in args.ops:
                    b = breakdown(provider, op, Path(tmp), pool)
                    result["ops"][op]["breakdown"] = b
                    rate = result["ops"][op]["infini_s"] / max(b["instructions"], 1.0)
                    print(f"  {op}: {b['instructions']:.0f} instructions per call (callgrind); "
                          "part: instructions (~us at the call's rate)")
                    for part, cost in b["parts"].items():
                        if cost >= 1:
                            print(f"    {part:28s} {cost:9.0f}  ({cost * rate * 1e6:6.2f} us)")
                        if args.top:
                            for name, n in b["top_functions"].get(part, []):
                                print(f"        {n:7d}  {name}")
        results.append(result)
    pool.shutdown()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
