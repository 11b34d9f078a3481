#!/usr/bin/env python
"""torch-infini benchmarks: infini vs CPU eager PyTorch (or memcpy), side by side.

    python benchmarks/run.py [--quick] [--json PATH] [--provider NAME]
                             [--cases SUBSTR ...] [--plot [PATH]]
                             [--contended [N]] [--markdown]

Every case runs on ``infini`` and on a reference in the same process,
interleaved (infini rep, reference rep, infini rep, ...), for several
repetitions; the table shows the median time per call of each side and the
ratio infini/reference (below 1: infini is faster). Each side is warmed up
once, its inner iteration count is calibrated so a repetition lasts about
``--rep-ms`` milliseconds (a training-step case at least 50 ms), and every
infini measurement ends with ``torch.infini.synchronize()`` before the clock
stops.

The clock and the statistics are PyTorch's ``torch.utils.benchmark``
(``timer``; each side's repetitions are one ``Measurement``: per-call
median and interquartile range). Its ``Timer`` does not run the
repetitions: ``Timer.timeit`` warms up twice before every run and
``blocked_autorange`` times one statement for its whole duration, while
this script interleaves the two sides repetition by repetition, so that
noise from the machine hits both alike, and ends each repetition of a case
with one synchronize, so that a call is what ``extra["unit"]`` says. Also
ours: the load header, the runs beside CPU-bound processes
(``--contended``), and a table of ratios with notes (``Compare``
tabulates times, not ratios).

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
With ``--contended [N]`` every selected case runs a second time beside N
CPU-bound processes; those records are named ``<case> [contended]`` and
carry ``extra["contended"]``. The header gives the load average before the
run: figures from a busy machine mean nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import datetime as _dt
import gc
import json
import os
import platform
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
CONTENDED_SUFFIX = " [contended]"
BUSY_LOAD = 0.5  # a 1-minute load average at or above this before the run: the machine is busy
QUEUED = 1000  # adds per call in the queued latency cases
# Case groups whose "cpu" reference is CPU PyTorch work (not infini work, not
# empty Python calls): timed in the clean reference process.
CLEAN_REFERENCE_GROUPS = ("add", "ops", "alloc", "mlp", "train", "beside")

KiB, MiB = 1 << 10, 1 << 20

# torch / torch_infini are imported in main(), after --provider set the
# environment they read.
torch: Any = None
torch_infini: Any = None
DEV: Any = None
# The clean reference process (benchmarks/clean_reference.py); None with
# --reference-in-process, and in the [nocache] child.
CLEAN: Any = None


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
    # Shortest repetition, whatever --rep-ms says: a training step takes
    # 3-8 ms, and a 10 ms repetition of one or two steps, each ended by a
    # synchronize, timed mostly the pipeline's fill and drain; its ratio
    # varied from 1.15x to 1.9x between runs of the same commit.
    min_rep_s: float = 0.0

    @property
    def clean_reference(self) -> bool:
        """Whether the reference is CPU PyTorch work, timed in the clean
        reference process (benchmarks/clean_reference.py) unless
        ``--reference-in-process``."""
        return self.reference == "cpu" and self.group in CLEAN_REFERENCE_GROUPS


def sync() -> None:
    if DEV.type != "cpu":  # the CPU in the clean reference process
        torch.infini.synchronize()


def synchronizer() -> Callable[[], None]:
    """``torch.infini.synchronize``, bound once for a tight loop (nothing in
    the clean reference process, where the cases' device is the CPU)."""
    return torch.infini.synchronize if DEV.type != "cpu" else _noop


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
        add, s = torch.add, synchronizer()

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
        s = synchronizer()
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
        add, s = torch.add, synchronizer()

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
        empty, u8, s = torch.empty, torch.uint8, synchronizer()

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


# Training steps: forward, cross_entropy, backward, AdamW step (zero_grad
# included), the model and its optimizer on infini against an identical pair
# on the CPU. The models are the model suite's (tests/models/).
MODELS_DIR = os.path.join(REPO, "tests", "models")


def _tiny_models():
    if MODELS_DIR not in sys.path:
        sys.path.insert(0, MODELS_DIR)
    import conv_models
    import transformer_models

    return conv_models, transformer_models


def _grad_free(model) -> set:
    """Parameters whose gradient is rounding noise (e.g. an attention key's
    bias, which softmax ignores): AdamW turns noise into a full-size update
    of either sign, on any two devices, so they are not compared."""
    return {name for name, p in model.named_parameters() if p.grad is not None and p.grad.abs().max() < 1e-6}


def _train_step(m, o, inp, lab):
    """One training step of ``m`` with optimizer ``o``; the loss, detached
    (no ``.item()``: that would synchronize inside a timed loop)."""
    o.zero_grad(set_to_none=True)
    out = m(inp)
    logits = getattr(out, "logits", out)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), lab.reshape(-1))
    loss.backward()
    o.step()
    return loss.detach()


def train_case(name: str, build: Callable[[], "torch.nn.Module"], inputs: Callable[[], tuple],
               note: str) -> Case:
    """One training step per call: ``zero_grad``, forward, ``cross_entropy``,
    ``backward``, ``AdamW.step``; on infini + synchronize, against the same
    model and optimizer on CPU eager. ``build()`` returns a module whose
    output is logits (or has ``.logits``); ``inputs()`` returns (x, labels)
    on the CPU. Both sides start from the same weights with the generators
    seeded alike, so after the warm-up step (one step each) their losses,
    gradients and weights are compared."""
    def setup() -> Bundle:
        import copy as _copy

        torch.manual_seed(0)  # the CPU and infini generators: weights, and dropout alike on both
        cpu_model = build().train()
        model = _copy.deepcopy(cpu_model).to(DEV)
        x, labels = inputs()
        xd, labelsd = x.to(DEV), labels.to(DEV)
        cpu_opt = torch.optim.AdamW(cpu_model.parameters(), lr=1e-3)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        losses: dict = {}

        def step(m, o, inp, lab, side: str) -> None:
            losses[side] = _train_step(m, o, inp, lab)

        torch.manual_seed(1)  # both generators: the warm-up steps draw the same dropout masks

        def infini(n: int) -> None:
            for _ in range(n):
                step(model, opt, xd, labelsd, "infini")
            sync()

        def reference(n: int) -> None:
            for _ in range(n):
                step(cpu_model, cpu_opt, x, labels, "cpu")

        def check() -> Optional[str]:  # after one warm-up step on each side
            tol = dict(rtol=1e-3, atol=1e-4)
            if not torch.allclose(losses["infini"].cpu(), losses["cpu"], **tol):
                return f"{name}: loss {losses['infini'].item():.6g} on infini, {losses['cpu'].item():.6g} on CPU"
            skip = _grad_free(cpu_model)
            for (pname, p), q in zip(model.named_parameters(), cpu_model.parameters()):
                if q.grad is not None and not torch.allclose(p.grad.cpu(), q.grad, **tol):
                    return f"{name}: gradient of {pname} differs from CPU"
                if pname not in skip and not torch.allclose(p.detach().cpu(), q.detach(), **tol):
                    return f"{name}: {pname} after the AdamW step differs from CPU"
            return None

        extra = {"parameters": sum(p.numel() for p in cpu_model.parameters()),
                 "input_shape": list(x.shape)}
        return Bundle(infini, reference, check, extra)

    return Case(name, "cpu", "training step (zero_grad, forward, cross_entropy, backward, AdamW) + synchronize",
                setup, note=note, group="train", min_rep_s=0.05)


def _tokens(*shape: int):
    return torch.randint(1, 64, shape, generator=torch.Generator().manual_seed(2))


def _images(*shape: int):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(3))


def _transformers_model(builder: str):
    try:
        import transformers
    except ImportError as exc:
        raise Skip(f"transformers is not installed ({first_line(exc)})") from None
    transformers.logging.set_verbosity_error()  # the tiny configs' token-id warnings
    return getattr(_tiny_models()[1], builder)()


def beside_stack_case() -> Case:
    """CPU PyTorch in a process that has just run infini work: a GPT-2-tiny
    training step on the CPU, in this process after infini training steps
    (the 'infini' column), against the same CPU step in the clean reference
    process. A ratio above 1 is what infini work costs the process's CPU
    work (a second OpenMP team once made it 2.4x)."""
    def setup() -> Bundle:
        import copy as _copy

        if DEV.type != "cpu" and CLEAN is None:
            raise Skip("needs the clean reference process (not with --reference-in-process)")
        torch.manual_seed(0)
        model = _transformers_model("tiny_gpt2").train()
        ref_model = _copy.deepcopy(model)
        x = _tokens(2, 12)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        ref_opt = torch.optim.AdamW(ref_model.parameters(), lr=1e-3)
        # The infini work: training steps, backward included (where the stack
        # once opened a second OpenMP team), of a copy on infini.
        work = _copy.deepcopy(model).to(DEV)
        work_opt = torch.optim.AdamW(work.parameters(), lr=1e-3)
        for _ in range(3):
            _train_step(work, work_opt, x.to(DEV), x.to(DEV))
        sync()

        def here(n: int) -> None:
            for _ in range(n):
                _train_step(model, opt, x, x)

        def reference(n: int) -> None:
            for _ in range(n):
                _train_step(ref_model, ref_opt, x, x)

        return Bundle(here, reference)

    return Case("beside/cpu-train-gpt2-tiny/after-infini-work", "cpu",
                "CPU training step (GPT-2 tiny) in this process, after infini training steps", setup,
                note="'infini' column: the CPU step in this process after infini work; ref: in a clean process",
                group="beside", min_rep_s=0.05)


def train_cases() -> list[Case]:
    def gpt2():
        return _transformers_model("tiny_gpt2")

    def llama():
        return _transformers_model("tiny_llama")

    def resnet():
        return _tiny_models()[0].TinyResNet()

    def mlp():
        layers: list = []
        for _ in range(4):
            layers += [torch.nn.Linear(512, 512), torch.nn.ReLU()]
        return torch.nn.Sequential(*layers)

    def labels(n: int, classes: int):
        return torch.randint(0, classes, (n,), generator=torch.Generator().manual_seed(4))

    return [
        train_case("train/gpt2-tiny/e32-l2/b2s12", gpt2, lambda: (_tokens(2, 12), _tokens(2, 12)),
                   "transformers GPT2LMHeadModel, 2 layers, dim 32, random init; ref CPU"),
        train_case("train/llama-tiny/h32-l2/b2s12", llama, lambda: (_tokens(2, 12), _tokens(2, 12)),
                   "transformers LlamaForCausalLM, 2 layers, dim 32, random init; ref CPU"),
        train_case("train/resnet-tiny/b4x3x16x16", resnet, lambda: (_images(4, 3, 16, 16), labels(4, 10)),
                   "2 ResNet basic blocks, BatchNorm, max-pool; ref CPU"),
        train_case("train/mlp/4xLinear512+ReLU/b64", mlp, lambda: (_images(64, 512), labels(64, 512)),
                   "4 x (Linear(512, 512) + ReLU), 512 classes; ref CPU"),
    ]


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
    cases += train_cases()
    cases.append(beside_stack_case())
    return cases


# --------------------------------------------------------------------------
# Measuring


def _elapsed(fn: Callable[[int], None], n: int) -> float:
    """Seconds for one repetition of ``n`` calls, on
    ``torch.utils.benchmark``'s clock."""
    from torch.utils.benchmark import timer

    t0 = timer()
    fn(n)
    return timer() - t0


def _measurement(case: Case, side: str, n: int, times: list[float]):
    """A side's repetitions (each ``n`` calls) as a
    ``torch.utils.benchmark.Measurement``: per-call median and interquartile
    range, by PyTorch's own statistics."""
    from torch.utils import benchmark

    spec = benchmark.TaskSpec(stmt=case.unit, setup="", label=case.group or "case", sub_label=case.name,
                              description=side, num_threads=torch.get_num_threads())
    return benchmark.Measurement(number_per_run=n, raw_times=times, task_spec=spec)


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
    target = max(target, case.min_rep_s)
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
        clean = CLEAN if case.clean_reference else None
        if clean is not None:
            skipped = clean.setup(case.name)
            if skipped:
                raise Skip(f"the clean reference process: {skipped}")
        n_inf = calibrate(bundle.infini, target)
        n_ref = clean.calibrate(target) if clean is not None else calibrate(bundle.reference, target)
        t_inf: list[float] = []
        t_ref: list[float] = []
        gc.collect()
        gc.disable()
        try:
            for _ in range(reps):  # interleaved: infini rep, reference rep, ...
                t_inf.append(_elapsed(bundle.infini, n_inf))
                t_ref.append(clean.rep(n_ref) if clean is not None else _elapsed(bundle.reference, n_ref))
        finally:
            gc.enable()
        m_inf = _measurement(case, "infini", n_inf, t_inf)
        m_ref = _measurement(case, "reference", n_ref, t_ref)
        mi, mr = m_inf.median, m_ref.median
        record.update(infini_s=mi, reference_s=mr, ratio=mi / mr)
        extra.update(reps=reps, calls_per_rep={"infini": n_inf, "reference": n_ref},
                     reference_process="clean" if clean is not None else "this",
                     infini_min_s=min(m_inf.times), reference_min_s=min(m_ref.times),
                     infini_iqr_s=m_inf.iqr, reference_iqr_s=m_ref.iqr)
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
            if CLEAN is not None and case.clean_reference:
                CLEAN.release()
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
# Contention: CPU-bound processes beside a case (--contended)

# A pure-Python spin loop: one core's worth of CPU demand, no memory traffic
# to speak of. It ends by itself after its time limit or when its parent
# (this script) is gone, so that no crash here can leave it spinning.
_BURNER = """
import os, sys, time
end, parent = time.monotonic() + float(sys.argv[1]), os.getppid()
sys.stdout.write("spinning\\n")
sys.stdout.flush()
while time.monotonic() < end and os.getppid() == parent:
    for _ in range(100000):
        pass
"""
BURNER_LIMIT_S = 300.0  # per case; far above the longest case


def _cpu_ticks(pid: int) -> Optional[int]:
    """utime + stime of a process in clock ticks (Linux), None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return int(fields[11]) + int(fields[12])
    except (OSError, IndexError, ValueError):
        return None


@contextlib.contextmanager
def burners(count: int, limit_s: float = BURNER_LIMIT_S):
    """``count`` CPU-bound processes running while the block runs, killed
    (and reaped) when it ends, however it ends. Yields a dict that, after the
    block, holds what they did: {"burners", "burner_pids", "burner_cpu_per_wall", "burner_alive_at_end"}."""
    procs: list[subprocess.Popen] = []
    info: dict = {"burners": count}
    started = time.monotonic()
    try:
        for _ in range(count):
            procs.append(subprocess.Popen([sys.executable, "-S", "-c", _BURNER, str(limit_s)],
                                          stdin=subprocess.DEVNULL, stdout=subprocess.PIPE))
        for proc in procs:
            proc.stdout.readline()  # it runs its loop from here on
        info["burner_pids"] = [proc.pid for proc in procs]
        started = time.monotonic()
        yield info
    finally:
        wall = time.monotonic() - started
        ticks = [_cpu_ticks(proc.pid) for proc in procs]
        info["burner_alive_at_end"] = all(proc.poll() is None for proc in procs)
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait(timeout=30)
            proc.stdout.close()
        if procs and None not in ticks and wall > 0:
            # The CPU the burners got, in cores (1.0 per burner: a full core each).
            info["burner_cpu_per_wall"] = round(sum(ticks) / os.sysconf("SC_CLK_TCK") / wall, 3)


class MachineLoad:
    """How busy the machine was: the load average before the run, and the CPU
    that processes other than this one (and its children) used during it,
    from /proc/stat (Linux; None elsewhere)."""

    def __init__(self) -> None:
        self.before = os.getloadavg() if hasattr(os, "getloadavg") else None
        # Children not yet reaped whose CPU counts as this script's own (the
        # clean reference process).
        self.own_pids: list[int] = []
        self.start_clock()

    def _sample(self) -> Optional[tuple[float, float]]:
        try:
            with open("/proc/stat") as f:
                fields = [int(v) for v in f.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        busy = sum(fields) - fields[3] - (fields[4] if len(fields) > 4 else 0)  # minus idle, iowait
        own = os.times()
        live = sum(_cpu_ticks(pid) or 0 for pid in self.own_pids) / os.sysconf("SC_CLK_TCK")
        return (busy / os.sysconf("SC_CLK_TCK"),
                own.user + own.system + own.children_user + own.children_system + live)

    def others_cores(self) -> Optional[float]:
        """Average cores used by other processes since the start. The
        burners and the [nocache] subprocess are this script's children,
        reaped by then, so they count as its own: this is what else ran."""
        end = self._sample()
        if self._start is None or end is None:
            return None
        wall = time.monotonic() - self._t0
        return max(0.0, ((end[0] - self._start[0]) - (end[1] - self._start[1])) / max(wall, 1e-9))

    def start_clock(self) -> None:
        self._start, self._t0 = self._sample(), time.monotonic()

    def busy(self) -> bool:
        return self.before is not None and self.before[0] >= BUSY_LOAD

    def line(self, cores: int) -> str:
        if self.before is None:
            return "load average unknown on this system: check that nothing else runs"
        verdict = ("BUSY: figures from a busy machine mean nothing; rerun when the 1-minute load is "
                   f"below {BUSY_LOAD}" if self.busy() else "idle")
        return (f"load average before the run {self.before[0]:.2f} / {self.before[1]:.2f} / {self.before[2]:.2f} "
                f"(1 / 5 / 15 min) on {cores} usable cores: {verdict}")


# --------------------------------------------------------------------------
# Output


def cpu_model() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return name


def usable_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def machine_lines(diag: dict, load: "MachineLoad") -> list[str]:
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            kb = int(f.readline().split()[1])
            mem = f", {kb / 2**20:.1f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    affinity = usable_cores()
    caps = ", ".join(f"{k}={'yes' if v else 'no'}" for k, v in diag["capabilities"].items())
    ok, reason = pinned_support()
    lines = [
        f"date:      {_dt.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine:   {platform.platform()}; {cpu_model()}; cpu_count={os.cpu_count()} "
        f"(usable {affinity}){mem}; torch threads={torch.get_num_threads()}",
        f"versions:  Python {platform.python_version()}, torch {torch.__version__}, "
        f"torch_infini {torch_infini.__version__}",
        f"provider:  {diag['provider']}  backend: {diag['backend']}  ({diag['selection_reason']}); "
        f"caching allocator {'on' if diag['caching_allocator'] else 'off'}",
        f"device:    {', '.join(d['name'] for d in diag['devices'])}; capabilities: {caps}",
        f"pinned:    {'available (tried)' if ok else reason}",
        f"load:      {load.line(affinity)}",
    ]
    if not ok and diag["capabilities"].get("pinned_memory"):
        lines.append("           note: diagnostics() reports pinned_memory=yes, but pin_memory() failed")
    return lines


def print_table(rows: list[tuple[Optional[Case], dict]]) -> None:
    header = ("case", "infini", "reference", "ratio", "note")
    body = [_cells(case, rec) for case, rec in rows]
    widths = [max(len(r[i]) for r in [header] + body) for i in range(4)]
    def line(r):
        return "  ".join([r[0].ljust(widths[0]), r[1].rjust(widths[1]), r[2].rjust(widths[2]),
                          r[3].rjust(widths[3]), r[4]]).rstrip()
    print(line(header))
    print("  ".join("-" * w for w in widths) + "  " + "-" * 4)
    for r in body:
        print(line(r))
    print()


def footer(reps: int, rep_ms: float) -> str:
    where = ("CPU references of PyTorch work are timed in their own clean process (never imported torch_infini, "
             "benchmarks/clean_reference.py),\n  interleaved with the infini side; "
             if CLEAN is not None else "CPU references are timed in this process (--reference-in-process), "
             "after its infini work; ")
    return (f"Medians of {reps} interleaved repetitions of ~{rep_ms:g} ms each (training steps: at least 50 ms), "
            f"time per call "
            f"(add/queued: per {QUEUED} adds + 1 synchronize). ratio = infini / reference; < 1 is faster.\n"
            "References: cpu = the same call on CPU eager tensors; for event/stream cases, which have no "
            "CPU equivalent,\n  an empty Python function call loop of the same count; for overlap cases, "
            "the same infini work run in sequence.\n  memcpy = ctypes.memmove of the same bytes between "
            "preallocated host buffers (one thread).\n" + where +
            "beside/...: 'infini' is a CPU step in this process after infini work.")


def _cells(case: Optional[Case], rec: dict) -> tuple[str, str, str, str, str]:
    ratio = f"{rec['ratio']:.2f}x" if rec["ratio"] is not None else "-"
    return (rec["case"], fmt_s(rec["infini_s"]),
            fmt_s(rec["reference_s"]) + (f" ({rec['reference']})" if rec["reference_s"] is not None else ""),
            ratio, note_for(case, rec))


def markdown_header(diag: dict, load: MachineLoad, command: str) -> list[str]:
    """The lines above a pasted table: the command, the date, the machine and
    how busy it was, so that a table in a README says where it came from."""
    now = _dt.datetime.now(_dt.timezone.utc)
    mem = ""
    try:
        with open("/proc/meminfo") as f:
            mem = f", {int(f.readline().split()[1]) / 2**20:.0f} GiB RAM"
    except (OSError, ValueError, IndexError):
        pass
    return [
        f"`{command}`, {now:%Y-%m-%d %H:%M} UTC",
        "",
        f"- machine: {cpu_model()}, {usable_cores()} usable cores{mem}; {platform.system()} "
        f"{platform.release()}",
        f"- software: Python {platform.python_version()}, torch {torch.__version__}, "
        f"torch_infini {torch_infini.__version__}, provider {diag['provider']} (backend {diag['backend']}), "
        f"torch threads {torch.get_num_threads()}",
        f"- {load.line(usable_cores())}",
    ]


def markdown_table(rows: list[tuple[Optional[Case], dict]], title: str, others: Optional[float]) -> list[str]:
    lines = [f"**{title}**" + (f" (other processes used {others:.2f} cores on average meanwhile)"
                               if others is not None else ""), "",
             "| case | infini | reference | ratio | note |", "|---|--:|--:|--:|---|"]
    for case, rec in rows:
        lines.append("| " + " | ".join(c.replace("|", "\\|") for c in _cells(case, rec)) + " |")
    return lines + [""]


def plot(records: list[dict], path: str, title: str, say: Callable[[str], None] = print) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        say(f"plot: matplotlib is not installed; skipped {path}")
        return
    done = [r for r in records if r["ratio"] is not None]
    if not done:
        say("plot: no measured cases; nothing to draw")
        return
    fig, ax = plt.subplots(figsize=(9, 0.32 * len(done) + 1.5))
    names = [r["case"] for r in done][::-1]
    ratios = [r["ratio"] for r in done][::-1]
    colors = ["tab:green" if x <= 1 else "tab:red" for x in ratios]
    hatches = ["//" if n.endswith(CONTENDED_SUFFIX) else "" for n in names]  # beside a CPU-bound process
    # Bars grow from 1 (parity) to the ratio, on a log scale.
    bars = ax.barh(names, [x - 1.0 for x in ratios], left=1.0, color=colors)
    for bar, hatch in zip(bars, hatches):
        bar.set_hatch(hatch)
    for y, x in enumerate(ratios):
        ax.annotate(f"{x:.2f}x", (x, y), xytext=(3 if x >= 1 else -3, 0), textcoords="offset points",
                    ha="left" if x >= 1 else "right", va="center", fontsize=8)
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xscale("log")
    lo, hi = min(ratios + [1.0]), max(ratios + [1.0])
    ax.set_xlim(lo / 4, hi * 4)
    ax.set_xlabel("ratio infini / reference (log scale; < 1: infini is faster)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    say(f"plot: wrote {path}")


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
                   help="run only cases whose name contains one of these (case-insensitive; "
                        "a leading ^: whose name starts with it)")
    p.add_argument("--plot", nargs="?", const=DEFAULT_PLOT, metavar="PATH",
                   help=f"bar chart of the ratios (PNG; default {os.path.relpath(DEFAULT_PLOT, REPO)})")
    p.add_argument("--reps", type=int, help="repetitions per side (default 7 quick, 11 full)")
    p.add_argument("--rep-ms", type=float, help="target ms per repetition (default 10 quick, 50 full)")
    p.add_argument("--contended", nargs="?", type=int, const=1, default=0, metavar="N",
                   help="run the selected cases a second time, each beside N CPU-bound processes "
                        "(default 1), reported as their own table; names end in" + CONTENDED_SUFFIX)
    p.add_argument("--markdown", action="store_true",
                   help="print the tables as Markdown under a dated header naming the machine and its "
                        "load (what the README pastes)")
    p.add_argument("--reference-in-process", action="store_true",
                   help="time CPU references in this process, after its infini work, instead of in the "
                        "clean reference process (benchmarks/clean_reference.py)")
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
    if args.contended < 0:
        p.error("--contended N must be >= 0")
    return args


def main(argv: Optional[list[str]] = None) -> int:
    global torch, torch_infini, DEV, CLEAN
    load = MachineLoad()  # before importing torch, which is work of our own
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
        return not args.cases or any(name.lower().startswith(s[1:].lower()) if s.startswith("^")
                                     else s.lower() in name.lower() for s in args.cases)

    selected = [c for c in cases if wanted(c.name)]
    nocache = [] if args._child else [c.name for c in cases
                                      if c.group == "alloc" and wanted(c.name + NOCACHE_SUFFIX)]
    if not selected and not nocache:
        print(f"error: no case matches {args.cases}; --list shows the names", file=sys.stderr)
        return 2

    if not args._child and not args.reference_in_process and any(c.clean_reference for c in selected):
        from clean_reference import CleanReference

        CLEAN = CleanReference(args.quick)
        load.own_pids.append(CLEAN.pid)
    markdown = args.markdown and not args._child
    if not args._child and not markdown:
        print("torch-infini benchmarks" + (" (--quick)" if args.quick else ""))
        print("\n".join(machine_lines(diag, load)))
        if load.busy():
            print("\nWARNING: the machine is busy (load average above): these figures mean nothing.")
        print()

    progress = not args._child and sys.stderr.isatty()
    by_nocache_name = {c.name + NOCACHE_SUFFIX: c for c in cases}

    def run_pass(burner_count: int) -> list[tuple[Optional[Case], dict]]:
        """Every selected case, each beside ``burner_count`` CPU-bound processes
        (0: none); the [nocache] rows only without burners."""
        rows: list[tuple[Optional[Case], dict]] = []
        pending = [] if burner_count else list(nocache)
        last_alloc = [c.name for c in selected if c.group == "alloc"][-1:] or [None]
        for case in selected:
            if progress:
                sys.stderr.write(f"\r\033[K  running {case.name}"
                                 f"{CONTENDED_SUFFIX if burner_count else ''} ...")
                sys.stderr.flush()
            if burner_count:
                with burners(burner_count) as info:
                    rec = measure(case, args.reps, args.rep_ms / 1e3)
                rec["case"] += CONTENDED_SUFFIX
                rec["extra"]["contended"] = info
            else:
                rec = measure(case, args.reps, args.rep_ms / 1e3)
            if args._child:
                rec["extra"]["caching_allocator"] = bool(diag["caching_allocator"])
            rows.append((case, rec))
            if case.name == last_alloc[0] and pending:  # the [nocache] rows follow the alloc rows
                rows += [(by_nocache_name.get(r["case"]), r) for r in run_nocache(pending, args)]
                pending = []
        if pending:  # [nocache] cases selected without their cached counterparts
            rows += [(by_nocache_name.get(r["case"]), r) for r in run_nocache(pending, args)]
        return rows

    load.start_clock()
    try:
        rows = run_pass(0)
        others = load.others_cores()
        contended_rows: list[tuple[Optional[Case], dict]] = []
        contended_others = None
        if args.contended and selected:
            load.start_clock()
            contended_rows = run_pass(args.contended)
            contended_others = load.others_cores()
    finally:
        if CLEAN is not None:
            CLEAN.close()
    records = [rec for _, rec in rows + contended_rows]

    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(records, f, indent=1)
    if args._child:
        return 0

    if progress:
        sys.stderr.write("\r\033[K")
        sys.stderr.flush()
    def say(text: str) -> None:  # under --markdown on stderr: stdout holds only what is pasted
        print(text, file=sys.stderr if markdown else sys.stdout)

    burner_title = (f"Beside {args.contended} CPU-bound process{'es' if args.contended > 1 else ''} "
                    f"(--contended): each case's name ends in{CONTENDED_SUFFIX}")
    if markdown:
        command = " ".join(["python", "benchmarks/run.py"] + (argv if argv is not None else sys.argv[1:]))
        out = markdown_header(diag, load, command) + [""]
        out += markdown_table(rows, "Idle" if not load.busy() else "Busy machine (figures mean nothing)", others)
        if contended_rows:
            out += markdown_table(contended_rows, burner_title, contended_others)
        out.append(footer(args.reps, args.rep_ms).replace("\n  ", " ").replace("\n", " "))
        print("\n".join(out))
    else:
        print_table(rows)
        if others is not None:
            print(f"other processes used {others:.2f} cores on average during these cases\n")
        if contended_rows:
            print(burner_title + ":\n")
            print_table(contended_rows)
            if contended_others is not None:
                print(f"other processes (not the burners) used {contended_others:.2f} cores on average "
                      "during these cases\n")
        print(footer(args.reps, args.rep_ms))
    if args.plot:
        busy = f"; BUSY (load {load.before[0]:.1f}): figures mean nothing" if load.busy() else ""
        plot(records, args.plot, f"torch-infini benchmarks{' (--quick)' if args.quick else ''}: "
             f"provider {diag['provider']}, backend {diag['backend']}, {_dt.date.today().isoformat()}{busy}",
             say)
    if args.json:
        say(f"json: wrote {len(records)} records to {args.json}")
    failed = [r["case"] for r in records
              if r["extra"].get("error") or "wrong_result" in r["extra"]]
    say(f"total {time.perf_counter() - started:.1f} s")
    if failed:
        print(f"FAILED (error or wrong result): {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
