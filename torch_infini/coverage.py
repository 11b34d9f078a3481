"""``python -m torch_infini coverage --backend NAME [--infiniops PIN] [--json [PATH]] -- script.py [args]``

Runs a program, unchanged, on the host runtime and reports, for every ATen
overload it called on infini tensors, how an InfiniOps backend would serve it
(``docs/coverage.md`` says how to read the report):

* native on that backend (an InfiniOps operator with a native kernel there);
* ATen-backed only (InfiniOps must be built ``WITH_TORCH=ON``);
* not served (refused there, or run on the CPU through the opt-in fallback);
* run by the device itself (views, copies, fills, allocation, random draws).

Calls are counted by the operator coverage record
(:mod:`torch_infini.fallback`); time is each operator's device time, as the
profiler's device timeline measures it (``--no-time`` skips the profiler).

The command turns the CUDA-to-infini switch on (:mod:`torch_infini.transfer_to_infini`)
before the program runs, so a program written for CUDA runs as it is
(``--no-cuda-switch`` leaves it off); the report says whether it was on, and
says so plainly when the program made no call on infini at all.
``--json PATH`` writes the report as JSON to PATH, the program's own output
staying on the terminal; ``--json`` alone prints it on stdout and sends the
program's stdout to stderr, so that stdout holds the JSON only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import runpy
import sys
import traceback
from collections.abc import Iterator, Sequence
from typing import Any

from . import backend_support as support

__all__ = ["run", "report", "format_report", "main"]

#: Report groups, in the order the summary lists them.
GROUPS = {
    "native": "native on {backend}",
    "aten": "ATen-backed only (WITH_TORCH=ON, PyTorch's '{device}')",
    "unserved": "not served on {backend}",
    "device": "run by the device itself (views, copies, fills, random)",
    "composite": "composite (run as their parts, counted on their own)",
}


def _device_times(prof) -> tuple[dict[str, float], float, float]:
    """Per recorded overload, the device time (ms) of the kernels it queued
    itself; the device time of all kernels; and of Inductor's generated
    kernels (which no ATen overload queued)."""
    from torch.autograd import DeviceType

    per_op: dict[str, float] = {}
    total = generated = 0.0
    for event in prof.events():
        if event.device_type == DeviceType.PrivateUse1:
            total += event.device_time_total / 1000.0
            if not event.name.startswith(("infini::host_kernel<aten::", "infini::host_kernel<infini::", "Memcpy")):
                generated += event.device_time_total / 1000.0
            continue
        if event.device_type != DeviceType.CPU or "::" not in event.name:
            continue
        self_ms = event.self_device_time_total / 1000.0
        if self_ms <= 0:
            continue
        key = f"{event.name}.{event.overload_name}" if event.overload_name else event.name
        per_op[key] = per_op.get(key, 0.0) + self_ms
    return per_op, total, generated


def _compile_with(backend_name: str):
    """torch.compile calls that leave the backend at its default use
    `backend_name`; undone by calling the result."""
    import torch

    original = torch.compile

    def compile_(model=None, *args, **kwargs):
        kwargs.setdefault("backend", backend_name)
        return original(model, *args, **kwargs) if model is not None else original(*args, **kwargs)

    torch.compile = compile_
    return lambda: setattr(torch, "compile", original)


#: What ``run`` reports of the CUDA-to-infini switch (``cuda_switch``).
CUDA_SWITCH = {
    "applied": "the CUDA-to-infini switch was applied by the command (as `import torch_infini.transfer_to_infini` "
               "does): 'cuda' devices and torch.cuda calls are mapped onto infini",
    "on": "the CUDA-to-infini switch was already on (TORCH_INFINI_TRANSFER_CUDA=1 or torch_infini.transfer_to_infini): "
          "'cuda' devices and torch.cuda calls are mapped onto infini",
    "off": "the CUDA-to-infini switch was off (--no-cuda-switch): a program written for CUDA fails here",
}


def _apply_cuda_switch(transfer_cuda: bool) -> str:
    """Turns the CUDA-to-infini switch on when `transfer_cuda` asks, for this
    process and, through its environment variable, for the processes the
    program starts. Returns the switch's state as :data:`CUDA_SWITCH` names it."""
    from torch_infini import _transfer

    if _transfer.is_enabled():
        return "on"
    if not transfer_cuda:
        return "off"
    _transfer.enable()
    os.environ[_transfer.ENVIRONMENT_VARIABLE] = "1"
    return "applied"


def run(argv: Sequence[str], time: bool = True, compile_backend: str | None = None,
        transfer_cuda: bool = False) -> dict[str, Any]:
    """Runs ``argv[0]`` as ``__main__`` with ``argv`` as ``sys.argv``,
    recording every operator it calls on infini tensors. Returns the
    coverage record's rows, per-overload device times, how it ended, and the
    state of the CUDA-to-infini switch (``cuda_switch``: ``applied``, ``on``
    or ``off``). With `transfer_cuda` the switch is turned on first; it then
    stays on for the process, as the switch always does (the command's
    default; off here so that a caller's process is not changed unasked)."""
    import torch

    import torch_infini  # noqa: F401  (the device)
    from torch_infini import fallback

    provider = torch_infini.diagnostics().get("provider")
    result: dict[str, Any] = {"script": argv[0], "argv": list(argv[1:]), "provider": provider,
                              "exit": 0, "error": None, "cuda_switch": _apply_cuda_switch(transfer_cuda)}
    prof = None
    if time:
        from torch.profiler import ProfilerActivity, profile

        prof = profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1])
    restore = _compile_with(compile_backend) if compile_backend else None
    saved_argv = sys.argv
    sys.argv = list(argv)
    was_recording = fallback.is_recording()
    fallback.reset_coverage()
    fallback.start_recording()
    try:
        if prof is not None:
            prof.__enter__()
        try:
            runpy.run_path(argv[0], run_name="__main__")
        except SystemExit as stop:
            code = stop.code
            result["exit"] = code if isinstance(code, int) else (0 if code is None else 1)
        except BaseException as error:  # noqa: BLE001  (reported with the record so far)
            result["exit"] = 1
            result["error"] = "".join(traceback.format_exception_only(type(error), error)).strip()
        finally:
            if torch.infini.is_available():
                try:
                    torch.infini.synchronize()
                except Exception as error:  # noqa: BLE001
                    result["error"] = result["error"] or f"{type(error).__name__}: {error}"
    finally:
        if prof is not None:
            prof.__exit__(None, None, None)
        if not was_recording:
            fallback.stop_recording()
        sys.argv = saved_argv
        if restore:
            restore()
    result["rows"] = fallback.coverage()
    if prof is not None:
        result["device_ms"], result["device_total_ms"], result["generated_ms"] = _device_times(prof)
    else:
        result["device_ms"], result["device_total_ms"], result["generated_ms"] = {}, 0.0, 0.0
    return result


def _reinterpreted() -> tuple[set[str], set[str]]:
    """The operators ("aten::where") whose bool operands the Infini stack
    passes as their bytes, and whose complex ones as pairs of their real
    dtype (csrc/runtime/bool_operands.h, complex_pairs.h)."""
    from . import _C

    return ({name for name, _, _ in _C._bool_operands_table()}, set(_C._complex_pairs_table()))


def report(run_result: dict[str, Any], backend: str, pin: str = support.CURRENT_PIN) -> dict[str, Any]:
    """The coverage report of a run (see :func:`run`) for `backend` at
    InfiniOps `pin`: one entry per overload, and totals per group. Calls
    with bool or complex tensors (InfiniRT has no such DataType) are counted
    apart (``bool_calls``, ``complex_calls``), with whether the stack passes
    them reinterpreted (``reinterpreted``: ``bool as bytes``, ``complex as
    pairs``; ATen-backed implementations only)."""
    from . import _aten_backed

    matrix = support.load_matrix(pin)
    as_bytes, as_pairs = _reinterpreted()
    timed = bool(run_result["device_ms"])
    calls: dict[str, dict[str, Any]] = {}
    for row in run_result["rows"]:
        entry = calls.setdefault(row["op"], {"op": row["op"], "calls": 0, "host_ms": 0.0, "ran": [],
                                             "bool_calls": 0, "complex_calls": 0})
        entry["calls"] += row["calls"]
        entry["host_ms"] += row["time_ms"]
        entry["bool_calls"] += row.get("bool_calls", 0)
        entry["complex_calls"] += row.get("complex_calls", 0)
        entry["ran"].append(row["kind"])
    overloads = []
    for op, entry in calls.items():
        kind = "composite" if entry["ran"] == ["composite"] else "native"
        verdict = support.classify(op, backend, pin, kind=kind)
        ms = run_result["device_ms"].get(op, 0.0) if timed else entry["host_ms"]
        name = op.split(".", 1)[0]
        reinterpreted = (["bool as bytes"] if entry["bool_calls"] and name in as_bytes else []) + (
            ["complex as pairs"] if entry["complex_calls"] and name in as_pairs else [])
        overloads.append({
            "op": op, "calls": entry["calls"], "time_ms": round(ms, 4), "status": verdict.status,
            "fails": verdict.fails or None, "decomposes": verdict.decomposes, "infiniops": list(verdict.operators), "today": verdict.today,
            "ran_on_host_as": entry["ran"], "bool_calls": entry["bool_calls"], "complex_calls": entry["complex_calls"],
            "reinterpreted": reinterpreted,
        })
    counted = [o for o in overloads if o["status"] != "composite"]
    on_infini = any(entry["calls"] for entry in calls.values())
    total_calls = sum(o["calls"] for o in counted) or 1
    total_ms = (run_result["device_total_ms"] if timed else sum(o["time_ms"] for o in counted)) or 1.0
    for o in overloads:
        shared = o["status"] != "composite"
        o["call_share"] = round(o["calls"] / total_calls, 4) if shared else None
        o["time_share"] = round(o["time_ms"] / total_ms, 4) if shared else None
    order = {name: i for i, name in enumerate(GROUPS)}
    overloads.sort(key=lambda o: (order[o["status"]], -o["time_ms"], -o["calls"], o["op"]))
    groups = {}
    for status in GROUPS:
        members = [o for o in overloads if o["status"] == status]
        groups[status] = {
            "overloads": len(members), "calls": sum(o["calls"] for o in members),
            "bool_calls": sum(o["bool_calls"] for o in members),
            "complex_calls": sum(o["complex_calls"] for o in members),
            "time_ms": round(sum(o["time_ms"] for o in members), 4),
            "call_share": None if status == "composite" else round(sum(o["calls"] for o in members) / total_calls, 4),
            "time_share": None if status == "composite" else round(sum(o["time_ms"] for o in members) / total_ms, 4),
        }
    unserved = [o for o in overloads if o["status"] == "unserved"]
    groups["unserved"]["refused"] = sum(1 for o in unserved if o["fails"] == "refused")
    groups["unserved"]["fallback"] = sum(1 for o in unserved if o["fails"] == "fallback")
    groups["unserved"]["decomposes"] = sum(1 for o in unserved if o["decomposes"])
    today = [o for o in counted if o["today"] and o["status"] != "device"]

    def dtype_calls(key: str, how: str) -> dict[str, int]:
        with_it = [o for o in counted if o[key]]
        return {"calls": sum(o[key] for o in with_it),
                "reinterpreted": sum(o[key] for o in with_it if how in o["reinterpreted"]),
                "device": sum(o[key] for o in with_it if o["status"] == "device")}

    return {
        "backend": backend,
        "aten_backed_needs": {"torch_device": support.torch_device(backend, pin),
                              "pytorch": _aten_backed.needed_pytorch(backend)},
        "dtype_calls": {"bool": dtype_calls("bool_calls", "bool as bytes"),
                        "complex": dtype_calls("complex_calls", "complex as pairs")},
        "infiniops": matrix["infiniops"],
        "schemas_from_torch": matrix["generated_with"]["torch"],
        "script": run_result["script"], "argv": run_result["argv"], "provider": run_result["provider"],
        "exit": run_result["exit"], "error": run_result["error"],
        "cuda_switch": run_result.get("cuda_switch", "off"),
        "ran_on_infini": on_infini,
        "time": "device" if timed else "host",
        "total_calls": sum(o["calls"] for o in counted),
        "total_time_ms": round(total_ms if timed else sum(o["time_ms"] for o in counted), 4),
        "generated_kernels_ms": round(run_result["generated_ms"], 4),
        "generated_kernels_share": round(run_result["generated_ms"] / total_ms, 4) if timed else None,
        "groups": groups,
        "provider_today": {"overloads": len(today), "calls": sum(o["calls"] for o in today),
                           "call_share": round(sum(o["calls"] for o in today) / total_calls, 4)},
        "overloads": overloads,
    }


def _pct(x: float | None) -> str:
    return "" if x is None else f"{100.0 * x:5.1f}%"


def format_report(rep: dict[str, Any], limit: int = 12) -> str:
    """The report as text: the summary first, then the overloads per group
    (the `limit` costliest of each; all with ``limit=0``)."""
    b, pin = rep["backend"], rep["infiniops"]["short"]
    time_word = "device time" if rep["time"] == "device" else "host time"
    lines = [f"torch-infini coverage: {rep['script']} on InfiniOps {pin}, backend {b} "
             f"(run on the {rep['provider']} runtime; {rep['total_calls']} calls on infini tensors, "
             f"{rep['total_time_ms']:.1f} ms {time_word})"]
    if rep["exit"] or rep["error"]:
        lines.append(f"  the program ended with exit status {rep['exit']}" +
                     (f": {rep['error']}" if rep["error"] else ""))
    lines.append(f"  {CUDA_SWITCH[rep['cuda_switch']]}")
    if not rep["ran_on_infini"]:
        what = (" before it ended" if rep["exit"] or rep["error"] else ": it ran on the CPU")
        lines.append(f"  the program made no call on the infini device{what}, so there is nothing to report "
                     f"for {b} (its tensors and modules must be on 'infini', or on 'cuda' with the switch on)")
        return "\n".join(lines)
    g = rep["groups"]
    device = rep["aten_backed_needs"]["torch_device"]
    lines.append(f"  {'':<60}{'overloads':>9}  {'calls':>8}  {'calls %':>7}  {'time %':>7}  {'bool':>6}  {'complex':>7}")
    for status, title in GROUPS.items():
        row = g[status]
        lines.append(f"  {title.format(backend=b, device=device):<60}{row['overloads']:>9}  {row['calls']:>8}  "
                     f"{_pct(row['call_share']):>7}  {_pct(row['time_share']):>7}  {row['bool_calls']:>6}  "
                     f"{row['complex_calls']:>7}")
    if rep["generated_kernels_share"]:
        lines.append(f"  {'compiled code: generated kernels (no ATen overload)':<60}{'':>9}  {'':>8}  {'':>7}  "
                     f"{_pct(rep['generated_kernels_share']):>7}")
    u = g["unserved"]
    if u["overloads"]:
        lines.append(f"  not served: {u['decomposes']} overloads run as PyTorch's decomposition where the operators it "
                     f"calls are served; otherwise {u['fallback']} would run on the CPU with "
                     f"TORCH_INFINI_CPU_FALLBACK=1, {u['refused']} are refused even then (random operators); "
                     "without it all are refused")
    if g["aten"]["overloads"]:
        lines.append(f"  ATen-backed on {b}: InfiniOps runs PyTorch's '{device}' kernels on InfiniRT's memory, so the "
                     f"process needs {rep['aten_backed_needs']['pytorch']}")
    for word, how, rest in (
            ("bool", "as their bytes (uint8)", "a call whose only bool tensor is its result runs where ATen's "
             "kernel takes uint8 for it; others are refused naming the missing DataType, unless PyTorch's "
             "decomposition serves them"),
            ("complex", "as pairs of their real dtype", "they are refused naming the missing DataType, unless "
             "PyTorch's decomposition serves them")):
        c = rep["dtype_calls"][word]
        if c["calls"]:
            lines.append(f"  {c['calls']} calls with {word} tensors (InfiniRT has no {word} DataType): "
                         f"{c['reinterpreted']} of operators the Infini stack passes them to {how} (its "
                         f"ATen-backed implementations; a rule per call may still refuse), {c['device']} run by "
                         f"the device itself; of the rest on the stack, {rest}")
    t = rep["provider_today"]
    lines.append(f"  torch-infini's Infini provider serves {t['overloads']} of these overloads on {b} "
                 f"({_pct(t['call_share']).strip()} of calls: native kernels, and ATen-backed ones where InfiniOps "
                 "is built WITH_TORCH=ON); the other native or ATen-backed ones (not marked 'served') have an "
                 "InfiniOps API that differs from ATen's, which no entry adapts yet")
    for status, title in GROUPS.items():
        members = [o for o in rep["overloads"] if o["status"] == status]
        if not members:
            continue
        shown = members if limit <= 0 else members[:limit]
        width = min(60, max(len(o["op"]) for o in shown) + 2)
        lines.append("")
        lines.append(f"{title.format(backend=b, device=device)}:")
        for o in shown:
            extra = []
            if o["infiniops"]:
                whole = status == "composite"
                extra.append(("bound whole to " if whole else "") + "InfiniOps " + ", ".join(o["infiniops"]))
            if o["fails"]:
                extra.append("refused there" if o["fails"] == "refused" else "fallback or refusal")
            if o["today"] and status not in ("device",):
                extra.append("served")
            for key, word in (("bool_calls", "bool"), ("complex_calls", "complex")):
                if o[key]:
                    how = "bool as bytes" if word == "bool" else "complex as pairs"
                    extra.append(f"{o[key]} {word}" + (f", {how}" if how in o["reinterpreted"] else ""))
            lines.append(f"  {o['op']:<{width}}{o['calls']:>8}  {_pct(o['call_share']):>7}  {_pct(o['time_share']):>7}"
                         + (f"  ({'; '.join(extra)})" if extra else ""))
        if len(shown) < len(members):
            lines.append(f"  ... {len(members) - len(shown)} more (--all lists every overload)")
    return "\n".join(lines)


def _backends(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    unknown = [n for n in names if n not in support.BACKENDS]
    if not names or unknown:
        raise argparse.ArgumentTypeError(f"unknown InfiniOps backend {', '.join(map(repr, unknown)) or repr(value)}: "
                                         f"expected {', '.join(support.BACKENDS)}")
    return names


def _run_on_the_host_runtime(argv: Sequence[str]) -> None:
    """Makes the command count on the host runtime, which runs every program
    (the counts are the program's calls; each backend's verdict comes from
    the support matrix, not from what this build serves), unless
    TORCH_INFINI_PROVIDER says otherwise. ``python -m torch_infini`` has
    imported torch_infini before this runs, and a build with the Infini stack
    may have chosen its provider then: the command then starts again with the
    variable set (the provider is chosen once per process)."""
    if "TORCH_INFINI_PROVIDER" in os.environ:
        return
    os.environ["TORCH_INFINI_PROVIDER"] = "host"
    import torch_infini

    if torch_infini.diagnostics().get("provider") not in (None, "host"):
        sys.stdout.flush(), sys.stderr.flush()
        os.execv(sys.executable, [sys.executable, "-m", "torch_infini", "coverage", *argv])


#: ``--json`` without a path: the report goes to stdout.
_STDOUT = "-"


def _json_destination(value: str | None) -> str | None:
    """Checks ``--json``'s PATH before the program runs (a long run must not
    end in an unwritable report): an error message, or None when it is fine."""
    if value is None or value == _STDOUT:
        return None
    if value.endswith(".py"):
        return (f"--json {value}: the report would overwrite a Python file; give the report's path after --json "
                "and the program after --, e.g. --json report.json -- script.py")
    folder = os.path.dirname(os.path.abspath(value))
    if not os.path.isdir(folder):
        return f"--json {value}: no folder {folder}"
    if os.path.isdir(value):
        return f"--json {value}: a folder, not a file"
    if not os.access(folder, os.W_OK):
        return f"--json {value}: cannot write in {folder}"
    return None


@contextlib.contextmanager
def _stdout_to_stderr() -> Iterator[None]:
    """Sends what is written to stdout (file descriptor 1: Python's prints,
    C code, child processes) to stderr while it is held, so that stdout is
    left for the JSON report."""
    for stream in (sys.stdout, sys.__stdout__, sys.stderr):
        if stream is not None:
            stream.flush()
    saved = os.dup(1)
    os.dup2(2, 1)
    try:
        yield
    finally:
        for stream in (sys.stdout, sys.__stdout__):
            if stream is not None:
                with contextlib.suppress(Exception):
                    stream.flush()
        os.dup2(saved, 1)
        os.close(saved)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m torch_infini coverage``: parses `argv` (default
    ``sys.argv[1:]``), runs the program and prints or writes the reports.
    Returns the exit status: 0 when the program ended well, 1 otherwise;
    argparse exits with 2 for a bad command line."""
    parser = argparse.ArgumentParser(prog="python -m torch_infini coverage", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", required=True, type=_backends, metavar="NAME[,NAME...]",
                        help=f"the InfiniOps backend ({', '.join(support.BACKENDS)}); several, separated by "
                             "commas, give one report each from one run")
    parser.add_argument("--infiniops", default=support.CURRENT_PIN, metavar="PIN",
                        help=f"the InfiniOps pin (default {support.CURRENT_PIN}; the package has "
                             f"{', '.join(support.pins())})")
    parser.add_argument("--json", nargs="?", const=_STDOUT, metavar="PATH",
                        help="write the report as JSON to PATH (the text report and the program's own output "
                             "stay on the terminal); --json alone prints the JSON on stdout and sends the "
                             "program's stdout to stderr")
    parser.add_argument("--no-cuda-switch", action="store_true",
                        help="leave the CUDA-to-infini switch off (by default the command turns it on, so that "
                             "a program written for CUDA runs on infini unmodified)")
    parser.add_argument("--all", action="store_true", help="list every overload, not the costliest of each group")
    parser.add_argument("--no-time", action="store_true",
                        help="skip the profiler: shares of host time at the call instead of device time")
    parser.add_argument("--compile-backend", metavar="NAME",
                        help="torch.compile calls without a backend use NAME (aot_eager: the compiled graph's "
                             "operators run eagerly, as on the Infini stack, where Inductor has no code generator)")
    parser.add_argument("program", nargs=argparse.REMAINDER, help="-- script.py [args]")
    args = parser.parse_args(argv)
    program = args.program[1:] if args.program[:1] == ["--"] else args.program
    problem = _json_destination(args.json)
    if problem:
        parser.error(problem)
    if not program:
        parser.error("no program: give it after --, e.g. -- script.py --steps 2")
    try:
        support.load_matrix(args.infiniops)
    except ValueError as error:
        parser.error(str(error))
    _run_on_the_host_runtime(argv if argv is not None else sys.argv[1:])
    json_path = os.path.abspath(args.json) if args.json and args.json != _STDOUT else None  # the program may chdir
    running = _stdout_to_stderr() if args.json == _STDOUT else contextlib.nullcontext()
    with running:
        result = run(program, time=not args.no_time, compile_backend=args.compile_backend,
                     transfer_cuda=not args.no_cuda_switch)
    reports = [report(result, backend, args.infiniops) for backend in args.backend]
    as_json = json.dumps(reports[0] if len(reports) == 1 else reports, indent=1)
    if args.json == _STDOUT:
        print(as_json, file=sys.__stdout__, flush=True)
        return int(result["exit"] != 0)
    text = "\n\n".join(format_report(rep, limit=0 if args.all else 12) for rep in reports)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as file:
            file.write(as_json + "\n")
        text += f"\n\nthe report as JSON: {args.json}"
    print(text, file=sys.__stdout__, flush=True)
    return int(result["exit"] != 0)
