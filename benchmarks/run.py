#!/usr/bin/env python
"""torch-infini benchmarks: infini vs CPU eager PyTorch (or memcpy), side by side.

    python benchmarks/run.py [--quick] [--json PATH] [--provider NAME]
                             [--cases SUBSTR ...] [--plot [PATH]]

Every case runs on ``infini`` and on a reference in the same process,
interleaved (infini rep, reference rep, infini rep, ...), for several
repetitions; the table shows the median time per call of each side and the
ratio infini/reference (below 1: infini is faster). Each side is warmed up
once, its inner iteration count is calibrated so a repetition lasts about
``--rep-ms`` milliseconds, clocks are ``time.perf_counter`` and every infini
measurement ends with ``torch.infini.synchronize()`` before the clock stops.

References: ``cpu`` (the same PyTorch call on CPU eager tensors, or, where
there is no CPU equivalent, an empty Python function call loop; the note
column says which) and ``memcpy`` (``ctypes.memmove`` between two
preallocated, pre-faulted host buffers of the same size: one thread, the
limit a runtime that copies with one memcpy can reach on this machine).

JSON (``--json PATH``): a plain list with one record per case::

    {"case": str, "infini_s": float|null, "reference_s": float|null,
     "ratio": float|null, "reference": "cpu"|"memcpy", "extra": {...}}

``infini_s``/``reference_s`` are medians in seconds per call (what one call
is: ``extra["unit"]``), ``ratio == infini_s / reference_s``. Skipped cases
(operator not implemented on infini, pinned memory unavailable, ...) are
*included* with ``infini_s``, ``reference_s`` and ``ratio`` null and the
reason in ``extra["skipped"]``; a case that failed unexpectedly is recorded
the same way with ``extra["error"] = true`` and makes the exit status 1.
Machine and provider information is printed in the header, not stored.
"""

from __future__ import annotations

import argparse
import ctypes
import datetime as _dt
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_PLOT = os.path.join(HERE, "results", "ratios.png")
PROVIDERS = ("host", "infini", "auto")
NOCACHE_SUFFIX = " [nocache]"
QUEUED = 1000  # adds per call in the queued latency cases

KiB, MiB = 1 << 10, 1 << 20

# torch / torch_infini are imported in main(), after --provider set the
# environment they read.
torch: Any = None
torch_infini: Any = None
DEV: Any = None


class Skip(Exception):
    """The case cannot run in this build; the message says why."""


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else type(exc).__name__)


def human_count(n: int) -> str:
    for unit, size in (("Mi", MiB), ("Ki", KiB)):
        if n >= size and n % size == 0:
            return f"{n // size}{unit}"
    return str(n)


def human_bytes(n: int) -> str:
    return f"{human_count(n)}B" if n >= KiB else f"{n}B"


def fmt_s(x: Optional[float]) -> str:
    if x is None:
        return "-"
    if x < 1e-6:
        return f"{x * 1e9:.0f} ns"
    if x < 1e-3:
        return f"{x * 1e6:.2f} us"
    if x < 1:
        return f"{x * 1e3:.2f} ms"
    return f"{x:.3f} s"


# --------------------------------------------------------------------------
# Cases


@dataclass
class Bundle:
    """What a case's setup returns: two timed bodies, each running ``n``
    calls (the infini one ending with a synchronize)."""

    infini: Callable[[int], None]
    reference: Callable[[int], None]
    check: Optional[Callable[[], Optional[str]]] = None  # after warm-up: None or what is wrong
    extra: dict = field(default_factory=dict)


@dataclass
class Case:
    name: str
    reference: str  # "cpu" | "memcpy"
    unit: str  # what one call is
    setup: Callable[[], Bundle]
    note: str = ""
    nbytes: int = 0  # > 0: report GB/s
    group: str = ""


def sync() -> None:
    torch.infini.synchronize()


def _noop() -> None:
    pass


def _host(n_bytes: int, fill: bool = True):
    t = torch.empty(n_bytes, dtype=torch.uint8)
    if not fill:
        return t.zero_()  # fault the pages in
    if n_bytes % 256 == 0:
        t.view(-1, 256).copy_(torch.arange(256, dtype=torch.uint8))  # a pattern, not a constant
    else:
        t.copy_(torch.arange(n_bytes, dtype=torch.int64).remainder_(256).to(torch.uint8))
    return t


_PINNED: Optional[tuple[bool, str]] = None


def pinned_support() -> tuple[bool, str]:
    """Whether pinned host memory and non_blocking copies work (tried, not
    read from the diagnostics); (False, reason) otherwise."""
    global _PINNED
    if _PINNED is None:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                h = torch.arange(256, dtype=torch.float32).pin_memory()
                back = torch.zeros(256).pin_memory()
            if not h.is_pinned():
                raise Skip("pin_memory() returned a tensor that is not pinned")
            d = torch.empty(256, device=DEV)
            d.copy_(h, non_blocking=True)
            back.copy_(d, non_blocking=True)
            sync()
            if not torch.equal(back, h):
                raise Skip("non_blocking copy through pinned memory gave wrong data")
            _PINNED = (True, "")
        except Exception as exc:  # noqa: BLE001 - any failure means "not supported"
            _PINNED = (False, f"pinned memory unavailable: {first_line(exc)}")
    return _PINNED


def _pinned(n_bytes: int, fill: bool = True):
    ok, reason = pinned_support()
    if not ok:
        raise Skip(reason)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _host(n_bytes, fill).pin_memory()


def add_sync_case(numel: int) -> Case:
    def setup() -> Bundle:
        ca, cb = torch.rand(numel), torch.rand(numel)
        a, b = ca.to(DEV), cb.to(DEV)
        add, s = torch.add, torch.infini.synchronize

        def infini(n: int) -> None:
            for _ in range(n):
                add(a, b)
                s()

        def reference(n: int) -> None:
            for _ in range(n):
                add(ca, cb)

        def check() -> Optional[str]:
            got, want = torch.add(a, b).cpu(), torch.add(ca, cb)
            return None if torch.equal(got, want) else "torch.add on infini differs from CPU"

        return Bundle(infini, reference, check)

    note = f"{numel} float32; ref CPU add"
    if numel * 4 >= 32 * MiB:  # above glibc's largest mmap threshold
        note += " (CPU maps + faults in a fresh output per call; infini reuses a cached block)"
    return Case(f"add/sync/{human_count(numel)}", "cpu", "torch.add + synchronize", setup,
                note=note, group="add")


def family_op_case(name: str, numel: int) -> Case:
    """One operator served by the op-family kernel (metadata from the meta
    run, cached; the work queued on the provider), synchronized per call."""
    ops = {"mul": lambda a, b: torch.mul(a, b), "softmax": lambda a, b: torch.softmax(a, -1)}
    fn = ops[name]

    def setup() -> Bundle:
        ca, cb = torch.rand(numel), torch.rand(numel)
        a, b = ca.to(DEV), cb.to(DEV)
        s = torch.infini.synchronize
        fn(a, b)  # NotImplementedError here -> skipped with the reason
        s()

        def infini(n: int) -> None:
            for _ in range(n):
                fn(a, b)
                s()

        def reference(n: int) -> None:
            for _ in range(n):
                fn(ca, cb)

        def check() -> Optional[str]:
            ok = torch.allclose(fn(a, b).cpu(), fn(ca, cb), rtol=1e-5, atol=1e-6)
            return None if ok else f"torch.{name} on infini differs from CPU"

        return Bundle(infini, reference, check)

    return Case(f"{name}/sync/{human_count(numel)}", "cpu", f"torch.{name} + synchronize", setup,
                note=f"{numel} float32; ref CPU {name}", group="ops")


def add_queued_case(numel: int) -> Case:
    def setup() -> Bundle:
        ca, cb = torch.rand(numel), torch.rand(numel)
        a, b = ca.to(DEV), cb.to(DEV)
        add, s = torch.add, torch.infini.synchronize

        def infini(n: int) -> None:
            for _ in range(n):
                for _ in range(QUEUED):
                    add(a, b)
                s()

        def reference(n: int) -> None:
            for _ in range(n):
                for _ in range(QUEUED):
                    add(ca, cb)

        return Bundle(infini, reference)

    return Case(f"add/queued{QUEUED}/{human_count(numel)}", "cpu",
                f"{QUEUED} x torch.add, then one synchronize", setup,
                note=f"per {QUEUED} adds; ref {QUEUED} CPU adds", group="add")


def copy_case(direction: str, kind: str, n_bytes: int) -> Case:
    def setup() -> Bundle:
        pinned = kind == "pinned"
        make = _pinned if pinned else _host
        dev_buf = torch.empty(n_bytes, dtype=torch.uint8, device=DEV)
        if direction == "h2d":
            host = make(n_bytes, True)
            src_ptr = host.data_ptr()

            def infini(n: int) -> None:
                for _ in range(n):
                    dev_buf.copy_(host, non_blocking=pinned)
                    sync()

            def check() -> Optional[str]:
                return None if torch.equal(dev_buf.cpu(), host) else "H2D copy gave wrong data"
        else:
            dev_buf.copy_(_host(n_bytes, True))
            host = make(n_bytes, False)
            src_ptr = host.data_ptr()

            def infini(n: int) -> None:
                for _ in range(n):
                    host.copy_(dev_buf, non_blocking=pinned)
                    sync()

            def check() -> Optional[str]:
                return None if torch.equal(host, dev_buf.cpu()) else "D2H copy gave wrong data"

        scratch = _host(n_bytes, False)  # memcpy destination, pre-faulted
        dst_ptr, memmove = scratch.data_ptr(), ctypes.memmove

        def reference(n: int) -> None:
            for _ in range(n):
                memmove(dst_ptr, src_ptr, n_bytes)

        b = Bundle(infini, reference, check)
        b.extra["_keep"] = (dev_buf, host, scratch)
        return b

    what = "non_blocking copy_ + synchronize" if kind == "pinned" else "copy_ + synchronize"
    return Case(f"copy/{direction}/{kind}/{human_bytes(n_bytes)}", "memcpy", what, setup,
                nbytes=n_bytes, group="copy")


def overlap_case(kind: str, n_bytes: int) -> Case:
    numel = 1 * MiB  # floats per add

    def setup() -> Bundle:
        pinned = kind == "pinned"
        host = (_pinned if pinned else _host)(n_bytes, True)
        dev_buf = torch.empty(n_bytes, dtype=torch.uint8, device=DEV)
        a, b = torch.rand(numel).to(DEV), torch.rand(numel).to(DEV)
        out = torch.empty(numel, device=DEV)
        s_copy, s_work = torch.infini.Stream(), torch.infini.Stream()
        sync()

        def copy() -> None:
            dev_buf.copy_(host, non_blocking=pinned)

        def work(k: int) -> None:
            for _ in range(k):
                torch.add(a, b, out=out)

        # Size the independent work to take about as long as the copy.
        def timed(fn: Callable[[], None]) -> float:
            fn()
            sync()
            best = float("inf")
            for _ in range(3):
                t0 = time.perf_counter()
                fn()
                sync()
                best = min(best, time.perf_counter() - t0)
            return best

        with torch.infini.stream(s_copy):
            t_copy = timed(copy)
            t_add = timed(lambda: work(1))
        k = max(1, round(t_copy / max(t_add, 1e-9)))

        def infini(n: int) -> None:  # overlapped: work on one stream, copy on another
            for _ in range(n):
                with torch.infini.stream(s_work):
                    work(k)
                with torch.infini.stream(s_copy):
                    copy()
                sync()

        def reference(n: int) -> None:  # the same work in sequence on one stream
            for _ in range(n):
                with torch.infini.stream(s_copy):
                    work(k)
                    copy()
                sync()

        def check() -> Optional[str]:
            return None if torch.equal(dev_buf.cpu(), host) else "copy under overlap gave wrong data"

        extra = {"adds": k, "add_numel": numel, "copy_bytes": n_bytes,
                 "reference_detail": "same copy + adds on infini, in sequence on one stream"}
        return Bundle(infini, reference, check, extra)

    return Case(f"overlap/h2d-{kind}+work/{human_bytes(n_bytes)}", "cpu",
                "H2D copy || adds on a second stream, then synchronize", setup,
                note="ref = same work sequential on infini (ideal ratio ~0.5)", group="overlap")


def alloc_case(n_bytes: int) -> Case:
    def setup() -> Bundle:
        empty, u8, s = torch.empty, torch.uint8, torch.infini.synchronize

        def infini(n: int) -> None:
            for _ in range(n):
                empty(n_bytes, dtype=u8, device=DEV)
            s()

        def reference(n: int) -> None:
            for _ in range(n):
                empty(n_bytes, dtype=u8)

        return Bundle(infini, reference)

    return Case(f"alloc/empty+free/{human_bytes(n_bytes)}", "cpu", "torch.empty + free", setup,
                note="ref CPU torch.empty + free", group="alloc")


def event_case() -> Case:
    def setup() -> Bundle:
        ev = torch.infini.Event()

        def infini(n: int) -> None:
            for _ in range(n):
                ev.record()
                ev.query()
            sync()

        def reference(n: int) -> None:
            for _ in range(n):
                _noop()
                _noop()

        return Bundle(infini, reference)

    return Case("event/record+query", "cpu", "Event.record() + Event.query()", setup,
                note="ref = 2 empty Python calls (no CPU equivalent)", group="stream")


def wait_stream_case() -> Case:
    def setup() -> Bundle:
        other, cur = torch.infini.Stream(), torch.infini.current_stream()

        def infini(n: int) -> None:
            for _ in range(n):
                other.wait_stream(cur)
            sync()

        def reference(n: int) -> None:
            for _ in range(n):
                _noop()

        return Bundle(infini, reference)

    return Case("stream/wait_stream", "cpu", "Stream.wait_stream(current_stream())", setup,
                note="ref = 1 empty Python call (no CPU equivalent)", group="stream")


def forward_case(name: str, build: Callable[[], "torch.nn.Module"], input_shape: tuple[int, ...]) -> Case:
    """A model's forward (no_grad) on infini + synchronize, against the same
    model on CPU; the model is built on the CPU with the CPU generator seeded."""
    def setup() -> Bundle:
        import copy as _copy

        torch.default_generator.manual_seed(0)  # CPU only: the model is built on the CPU
        cpu_model = build().eval()
        x = torch.randn(*input_shape)
        model = _copy.deepcopy(cpu_model).to(DEV)
        xd = x.to(DEV)
        with torch.no_grad():
            model(xd)  # NotImplementedError here -> skipped with the reason
        sync()

        def infini(n: int) -> None:
            with torch.no_grad():
                for _ in range(n):
                    model(xd)
                sync()

        def reference(n: int) -> None:
            with torch.no_grad():
                for _ in range(n):
                    cpu_model(x)

        def check() -> Optional[str]:
            with torch.no_grad():
                got, want = model(xd).cpu(), cpu_model(x)
            return None if torch.allclose(got, want, rtol=1e-4, atol=1e-5) else f"{name} output differs from CPU"

        return Bundle(infini, reference, check)

    return Case(name, "cpu", "forward (no_grad) + synchronize", setup, note="ref CPU forward", group="mlp")


def mlp_case() -> Case:
    def build() -> "torch.nn.Module":
        layers: list = []
        for _ in range(4):
            layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers)

    return forward_case("mlp/4xLinear512+ReLU/b64", build, (64, 512))


def decoder_case() -> Case:
    def build() -> "torch.nn.Module":
        from models import DecoderBlock

        return DecoderBlock()

    return forward_case("decoder/llama-block/d64-h4/b4s32", build, (4, 32, 64))


def all_cases(quick: bool) -> list[Case]:
    add_sizes = [1, KiB, MiB] if quick else [1, KiB, MiB, 16 * MiB]
    copy_sizes = [4 * KiB, MiB, 16 * MiB] if quick else [4 * KiB, 64 * KiB, MiB, 16 * MiB, 256 * MiB]
    overlap_bytes = 16 * MiB if quick else 64 * MiB
    cases = [add_sync_case(n) for n in add_sizes]
    cases += [add_queued_case(n) for n in (1, KiB)]
    cases += [family_op_case(name, n) for name in ("mul", "softmax") for n in (KiB, MiB)]
    for direction in ("h2d", "d2h"):
        for kind in ("pageable", "pinned"):
            cases += [copy_case(direction, kind, n) for n in copy_sizes]
    cases += [overlap_case(kind, overlap_bytes) for kind in ("pageable", "pinned")]
    cases += [alloc_case(n) for n in (KiB, MiB, 64 * MiB)]
    cases += [event_case(), wait_stream_case(), mlp_case(), decoder_case()]
    return cases


# --------------------------------------------------------------------------
# Measuring


def _elapsed(fn: Callable[[int], None], n: int) -> float:
    t0 = time.perf_counter()
    fn(n)
    return time.perf_counter() - t0


def calibrate(fn: Callable[[int], None], target: float, max_n: int = 1 << 20) -> int:
    """Calls per repetition so that one repetition lasts about ``target``."""
    n = 1
    while True:
        dt = _elapsed(fn, n)
        if dt >= target / 8 or n >= max_n:
            break
        n *= 8 if dt < target / 256 else 2
    return max(1, min(max_n, int(n * target / max(dt, 1e-9))))


def measure(case: Case, reps: int, target: float) -> dict:
    record: dict = {"case": case.name, "infini_s": None, "reference_s": None,
                    "ratio": None, "reference": case.reference}
    extra: dict = {"unit": case.unit}
    record["extra"] = extra
    bundle = None
    try:
        bundle = case.setup()
        # Warm-up: once each.
        bundle.infini(1)
        bundle.reference(1)
        problem = bundle.check() if bundle.check else None
        if problem:
            extra["wrong_result"] = problem
        n_inf = calibrate(bundle.infini, target)
        n_ref = calibrate(bundle.reference, target)
        t_inf: list[float] = []
        t_ref: list[float] = []
        gc.collect()
        gc.disable()
        try:
            for _ in range(reps):  # interleaved: infini rep, reference rep, ...
                t_inf.append(_elapsed(bundle.infini, n_inf) / n_inf)
                t_ref.append(_elapsed(bundle.reference, n_ref) / n_ref)
        finally:
            gc.enable()
        mi, mr = statistics.median(t_inf), statistics.median(t_ref)
        record.update(infini_s=mi, reference_s=mr, ratio=mi / mr)
        extra.update(reps=reps, calls_per_rep={"infini": n_inf, "reference": n_ref},
                     infini_min_s=min(t_inf), reference_min_s=min(t_ref))
        extra.update({k: v for k, v in bundle.extra.items() if not k.startswith("_")})
        if case.nbytes:
            extra["bytes"] = case.nbytes
            extra["infini_GBps"] = case.nbytes / mi / 1e9
            extra["reference_GBps"] = case.nbytes / mr / 1e9
    except (Skip, NotImplementedError) as exc:
        extra["skipped"] = first_line(exc)
    except Exception as exc:  # noqa: BLE001 - reported, exit status 1
        traceback.print_exc()
        extra["skipped"] = f"error: {type(exc).__name__}: {first_line(exc)}"
        extra["error"] = True
    finally:
        del bundle
        try:
            sync()
            torch.infini.empty_cache()
        except Exception:  # noqa: BLE001
            pass
        gc.collect()
    return record


NOTE_WIDTH = 100  # the table shortens longer notes; the JSON keeps them whole


def note_for(case: Optional[Case], rec: dict) -> str:
    text = _note(case, rec)
    return text if len(text) <= NOTE_WIDTH else text[: NOTE_WIDTH - 3].rstrip() + "..."


def _note(case: Optional[Case], rec: dict) -> str:
    extra = rec.get("extra", {})
    if "skipped" in extra:
        return ("ERROR " if extra.get("error") else "skipped: ") + extra["skipped"]
    parts = []
    if "wrong_result" in extra:
        parts.append("WRONG RESULT: " + extra["wrong_result"])
    if "infini_GBps" in extra:
        parts.append(f"{extra['infini_GBps']:.2f} vs {extra['reference_GBps']:.2f} GB/s")
    if "adds" in extra:
        parts.append(f"{extra['adds']} adds of 1Mi")
    if case is not None and case.note:
        parts.append(case.note)
    if "nocache_note" in extra:
        parts.append(extra["nocache_note"])
    return "; ".join(parts)


# --------------------------------------------------------------------------
# Caching-disabled allocation cases: a child process


def run_nocache(names: list[str], args: argparse.Namespace) -> list[dict]:
    """Runs the alloc cases ``names`` in a subprocess with caching off and
    returns their records renamed with the ``[nocache]`` suffix."""
    env = dict(os.environ, TORCH_INFINI_ALLOC_CONF="caching:0")
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "nocache.json")
        cmd = [sys.executable, os.path.abspath(__file__), "--_child", "--json", out,
               "--reps", str(args.reps), "--rep-ms", str(args.rep_ms), "--_exact", *names]
        if args.quick:
            cmd.append("--quick")
        if args.provider:
            cmd += ["--provider", args.provider]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if proc.returncode != 0 or not os.path.exists(out):
            reason = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            sys.stderr.write(proc.stderr)
            return [{"case": n + NOCACHE_SUFFIX, "infini_s": None, "reference_s": None, "ratio": None,
                     "reference": "cpu",
                     "extra": {"skipped": f"error: caching:0 subprocess failed: {reason}", "error": True}}
                    for n in names]
        with open(out) as f:
            records = json.load(f)
    for rec in records:
        rec["case"] += NOCACHE_SUFFIX
        extra = rec.setdefault("extra", {})
        extra["subprocess"] = "TORCH_INFINI_ALLOC_CONF=caching:0"
        if extra.get("caching_allocator") is not False:
            extra["nocache_note"] = "caching still reported on!"
    return records


# --------------------------------------------------------------------------
# Output


def machine_lines(diag: dict) -> list[str]:
    cpu_model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu_model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 2**20:.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    caps = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in diag["capabilities"].items())
    ok, reason = pinned_support()
    lines = [
        f"date:      {_dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine:   {platform.platform()}; {cpu_model}; cpu_count={os.cpu_count()} "
        f"(usable {affinity}){mem}; torch threads={torch.get_num_threads()}",
        f"versions:  Python {platform.python_version()}, torch {torch.__version__}, "
        f"torch_infini {torch_infini.__version__}",
        f"provider:  {diag['provider']}  backend: {diag['backend']}  ({diag['selection_reason']}); "
        f"caching allocator {'on' if diag['caching_allocator'] else 'off'}",
        f"device:    {', '.join(d['name'] for d in diag['devices'])}; capabilities: {caps}",
        f"pinned:    {'available (tried)' if ok else reason}",
    ]
    if not ok and diag["capabilities"].get("pinned_memory"):
        lines.append("           note: diagnostics() reports pinned_memory=yes, but pin_memory() failed")
    return lines


def print_table(rows: list[tuple[Optional[Case], dict]], reps: int, rep_ms: float) -> None:
    header = ("case", "infini", "reference", "ratio", "note")
    body = []
    for case, rec in rows:
        ratio = f"{rec['ratio']:.2f}x" if rec["ratio"] is not None else "-"
        body.append((rec["case"], fmt_s(rec["infini_s"]), fmt_s(rec["reference_s"]) +
                     (f" ({rec['reference']})" if rec["reference_s"] is not None else ""),
                     ratio, note_for(case, rec)))
    widths = [max(len(r[i]) for r in [header] + body) for i in range(4)]
    def line(r):
        return "  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2]),
                          r[3].rjust(widths[3]), r[4]]).rstrip()
    print(line(header))
    print("  ".join("-" * w for w in widths) + "  " + "-" * 4)
    for r in body:
        print(line(r))
    print()
    print(f"Medians of {reps} interleaved repetitions of ~{rep_ms:g} ms each, time per call "
          f"(add/queued: per {QUEUED} adds + 1 synchronize). ratio = infini / reference; < 1 is faster.")
    print("References: cpu = the same call on CPU eager tensors; for event/stream cases, which have no "
          "CPU equivalent,\n  an empty Python function call loop of the same count; for overlap cases, "
          "the same infini work run in sequence.\n  memcpy = ctypes.memmove of the same bytes between "
          "preallocated host buffers (one thread).")


def plot(records: list[dict], path: str, title: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plot: matplotlib is not installed; skipped {path}")
        return
    done = [r for r in records if r["ratio"] is not None]
    if not done:
        print("plot: no measured cases; nothing to draw")
        return
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(done) + 1.5))
    names = [r["case"] for r in done][::-1]
    ratios = [r["ratio"] for r in done][::-1]
    colors = ["tab:green" if x <= 1 else "tab:red" for x in ratios]
    # Bars grow from 1 (parity) to the ratio, on a log scale.
    ax.barh(names, [x - 1.0 for x in ratios], left=1.0, color=colors)
    for y, x in enumerate(ratios):
        ax.annotate(f"{x:.2f}x", (x, y), xytext=(3 if x >= 1 else -3, 0), textcoords="offset points",
                    ha="left" if x >= 1 else "right", va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
    ax.set_xlim(lo / 2, hi * 3)
    ax.set_xlabel("ratio infini / reference (log scale; < 1: infini is faster)")
    ax.set_title(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"plot: wrote {path}")


# --------------------------------------------------------------------------


def parse_args(argv: Optional[list[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (under 60 s)")
    p.add_argument("--json", metavar="PATH", help="write one record per case to PATH")
    p.add_argument("--provider", choices=PROVIDERS,
                   help="set TORCH_INFINI_PROVIDER before importing torch_infini; "
                        "fail if another provider is selected")
    p.add_argument("--cases", nargs="+", metavar="SUBSTR",
                   help="run only cases whose name contains one of these (case-insensitive)")
    p.add_argument("--plot", nargs="?", const=DEFAULT_PLOT, metavar="PATH",
                   help=f"bar chart of the ratios (PNG; default {os.path.relpath(DEFAULT_PLOT, REPO)})")
    p.add_argument("--reps", type=int, help="repetitions per side (default 7 quick, 11 full)")
    p.add_argument("--rep-ms", type=float, help="target ms per repetition (default 10 quick, 50 full)")
    p.add_argument("--list", action="store_true", help="list the case names and exit")
    p.add_argument("--_child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--_exact", nargs="+", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 7 if args.quick else 11
    if args.rep_ms is None:
        args.rep_ms = 10.0 if args.quick else 50.0
    if args.reps < 1 or args.rep_ms <= 0:
        p.error("--reps must be >= 1 and --rep-ms > 0")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    global torch, torch_infini, DEV
    args = parse_args(argv)
    started = time.perf_counter()
    if args.provider:
        os.environ["TORCH_INFINI_PROVIDER"] = args.provider

    import torch as _torch
    torch = _torch
    try:
        import torch_infini as _ti
        torch_infini = _ti
        diag = torch_infini.diagnostics()  # never raises: failures are in diag["problems"]
    except Exception as exc:  # noqa: BLE001
        diag = {"usable": False, "problems": [{"problem": f"{type(exc).__name__}: {first_line(exc)}"}]}
    if not diag["usable"]:
        requested = os.environ.get("TORCH_INFINI_PROVIDER", "auto")
        problems = "; ".join(p["problem"] for p in diag["problems"]) or "no infini device"
        print(f"error: torch_infini could not start with TORCH_INFINI_PROVIDER={requested}: {problems}",
              file=sys.stderr)
        return 2
    if args.provider and args.provider != "auto" and diag["provider"] != args.provider:
        print(f"error: --provider {args.provider} requested, but torch_infini selected provider "
              f"'{diag['provider']}' (backend '{diag['backend']}': {diag['selection_reason']})",
              file=sys.stderr)
        return 2
    if diag["device_count"] < 1:
        print("error: torch_infini reports no infini device", file=sys.stderr)
        return 2
    DEV = torch.device("infini:0")
    # The benchmarks time the device: a case that needs an operator without an
    # infini kernel is skipped with the reason, never timed through the opt-in
    # CPU fallback (TORCH_INFINI_CPU_FALLBACK) as if it ran on infini.
    torch_infini.fallback.disable()

    cases = all_cases(args.quick)
    names = [c.name for c in cases] + [c.name + NOCACHE_SUFFIX for c in cases if c.group == "alloc"]
    if args.list:
        print("\n".join(names))
        return 0

    def wanted(name: str) -> bool:
        if args._exact is not None:
            return name in args._exact
        return not args.cases or any(s.lower() in name.lower() for s in args.cases)

    selected = [c for c in cases if wanted(c.name)]
    nocache = [] if args._child else [c.name for c in cases
                                      if c.group == "alloc" and wanted(c.name + NOCACHE_SUFFIX)]
    if not selected and not nocache:
        print(f"error: no case matches {args.cases}; --list shows the names", file=sys.stderr)
        return 2

    if not args._child:
        print("torch-infini benchmarks" + (" (--quick)" if args.quick else ""))
        print("\n".join(machine_lines(diag)))
        print()

    progress = not args._child and sys.stderr.isatty()
    rows: list[tuple[Optional[Case], dict]] = []
    by_nocache_name = {c.name + NOCACHE_SUFFIX: c for c in cases}
    last_alloc = [c.name for c in selected if c.group == "alloc"][-1:] or [None]
    for case in selected:
        if progress:
            sys.stderr.write(f"\r\033[K  running {case.name} ...")
            sys.stderr.flush()
        rec = measure(case, args.reps, args.rep_ms / 1e3)
        if args._child:
            rec["extra"]["caching_allocator"] = bool(diag["caching_allocator"])
        rows.append((case, rec))
        if case.name == last_alloc[0] and nocache:  # the [nocache] rows follow the alloc rows
            rows += [(by_nocache_name.get(r["case"]), r) for r in run_nocache(nocache, args)]
            nocache = []
    if nocache:  # [nocache] cases selected without their cached counterparts
        rows += [(by_nocache_name.get(r["case"]), r) for r in run_nocache(nocache, args)]
    records = [rec for _, rec in rows]

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    if args._child:
        return 0

    if progress:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    print_table(rows, args.reps, args.rep_ms)
    if args.plot:
        plot(records, args.plot, f"torch-infini benchmarks{' (--quick)' if args.quick else ''}: "
             f"provider {diag['provider']}, backend {diag['backend']}, {_dt.date.today().isoformat()}")
    if args.json:
        print(f"json: wrote {len(records)} records to {args.json}")
    failed = [r["case"] for r in records
              if r["extra"].get("error") or "wrong_result" in r["extra"]]
    print(f"total {time.perf_counter() - started:.1f} s")
    if failed:
        print(f"FAILED (error or wrong result): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
