"""The opt-in CPU fallback and the operator coverage report.

By default an operator the infini device has no kernel for raises
``NotImplementedError`` naming it. With the CPU fallback on, such an operator
runs on the CPU instead: its tensor inputs are copied to the host, the CPU
kernel runs, in-place and ``out=`` arguments are written back into the
original infini tensors and new outputs are copied to the device. The copies
are ordered with the current stream (they complete after its earlier work and
before the operator returns). The first fallback of each operator warns,
naming it.

Some operators keep raising even with the fallback on, because a copy cannot
make them right:

* views (their result must share the input's storage: ``Tensor.unfold``,
  ``torch.view_as_real``, ...);
* random operators (they would draw from the CPU generator: ``normal_``,
  ``uniform_``, ``bernoulli``, ``dropout``, ``randperm``, ...; anything taking
  a ``Generator``);
* factory operators without tensor inputs (``torch.tril_indices(...,
  device="infini")``).

Switches (all process-wide)::

    TORCH_INFINI_CPU_FALLBACK=1                 # on at start-up (default off)
    TORCH_INFINI_CPU_FALLBACK_ALLOW=aten::cumsum,aten::sort
    TORCH_INFINI_CPU_FALLBACK_DENY=aten::addmm.out

    torch_infini.fallback.enable() / disable() / is_enabled()
    with torch_infini.fallback.enabled(): ...   # restores the previous state
    torch_infini.fallback.allow(["aten::cumsum"]); deny(["aten::mm"])

Operator names are ATen's: ``"aten::cumsum"`` matches every overload,
``"aten::cumsum.out"`` only that one (a name without a namespace is taken as
aten's). Which overload reaches the fallback is often the ``.out`` one
(``torch.cumsum`` arrives as ``aten::cumsum.out``), so names without an
overload are usually what you want. A non-empty allow-list limits the
fallback to the operators it names; the deny-list wins over it.

The coverage record counts every operator called on infini tensors: how it
ran (``native``: an infini kernel; ``aten-backed``: on the Infini stack, an
InfiniOps operator's ATen-backed implementation (InfiniOps built
``WITH_TORCH=ON``), where the device has no native kernel for the call;
``composite``: ATen's device-generic
decomposition, whose parts are counted too; ``fallback``: on the CPU;
``unsupported``: raised), how often, and the host time it took (inclusive of
nested operators; for native kernels, the time to queue the work).
Fallbacks and failures are always counted. Native and composite calls are
counted only while recording (``start_recording()``, ``recording()``, or
``TORCH_INFINI_OP_REPORT=1``, which also prints the report at exit), because
counting them hooks every operator call; when recording is off they cost
nothing.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any

from . import _C, _env

__all__ = [
    "enable",
    "disable",
    "is_enabled",
    "enabled",
    "allow",
    "deny",
    "allow_list",
    "deny_list",
    "coverage",
    "reset_coverage",
    "format_coverage",
    "start_recording",
    "stop_recording",
    "is_recording",
    "recording",
]

REPORT_VARIABLE = "TORCH_INFINI_OP_REPORT"


def enable() -> None:
    """Turn the CPU fallback on for this process."""
    _C._fallback_set_enabled(True)


def disable() -> None:
    """Turn the CPU fallback off: operators without a kernel raise again."""
    _C._fallback_set_enabled(False)


def is_enabled() -> bool:
    """Whether operators without an infini kernel run on the CPU."""
    return bool(_C._fallback_enabled())


@contextlib.contextmanager
def enabled(on: bool = True) -> Iterator[None]:
    """Turn the CPU fallback on (or off, with ``on=False``) inside the block,
    and restore the previous state when it exits, even on an exception.

    The switch is process-wide, not per thread: other threads see it too."""
    previous = is_enabled()
    _C._fallback_set_enabled(bool(on))
    try:
        yield
    finally:
        _C._fallback_set_enabled(previous)


def _names(names: Iterable[str] | str | None) -> list[str]:
    if names is None:
        return []
    if isinstance(names, str):
        return names.split(",")
    return [str(name) for name in names]


def allow(names: Iterable[str] | str | None) -> None:
    """Replace the allow-list: only the operators it names may fall back.
    ``None`` or an empty list clears it (every operator may). A string is
    split at commas, as the environment variable is. Unknown aten names raise
    ``RuntimeError`` naming them."""
    _C._fallback_set_allow(_names(names))


def deny(names: Iterable[str] | str | None) -> None:
    """Replace the deny-list: the operators it names raise
    ``NotImplementedError`` instead of falling back, even when allowed.
    ``None`` or an empty list clears it."""
    _C._fallback_set_deny(_names(names))


def allow_list() -> list[str]:
    """The allow-list, normalized (``"aten::cumsum"``), sorted."""
    return list(_C._fallback_allow_list())


def deny_list() -> list[str]:
    """The deny-list, normalized, sorted."""
    return list(_C._fallback_deny_list())


def coverage() -> list[dict[str, Any]]:
    """The coverage record: one dict per operator and way it ran, with keys
    ``op`` (``"aten::cumsum.out"``), ``kind`` (``"fallback"``,
    ``"unsupported"``, ``"native"``, ``"aten-backed"`` (an InfiniOps kernel's
    ATen-backed implementation) or ``"composite"``), ``calls`` and
    ``time_ms`` (host time). Fallbacks come first, the costliest first."""
    return [dict(row) for row in _C._coverage()]


def reset_coverage() -> None:
    """Forget every count (recording stays as it is)."""
    _C._coverage_reset()


def start_recording() -> None:
    """Also count native and composite calls from now on."""
    _C._coverage_start_recording()


def stop_recording() -> None:
    """Stop counting native and composite calls (fallbacks still count)."""
    _C._coverage_stop_recording()


def is_recording() -> bool:
    """Whether native and composite calls are being counted."""
    return bool(_C._coverage_recording())


@contextlib.contextmanager
def recording(reset: bool = True) -> Iterator[None]:
    """Count native and composite calls inside the block (and, with
    ``reset``, start from an empty record); the previous recording state is
    restored on exit. Read the result with ``coverage()``."""
    was_recording = is_recording()
    if reset:
        reset_coverage()
    start_recording()
    try:
        yield
    finally:
        if not was_recording:
            stop_recording()


def format_coverage(rows: list[dict[str, Any]] | None = None) -> str:
    """The coverage record as a table, with a one-line summary per kind."""
    rows = coverage() if rows is None else rows
    if not rows:
        return "torch_infini operator coverage: no operator was called on infini tensors"
    totals: dict[str, list[float]] = {}
    for row in rows:
        total = totals.setdefault(row["kind"], [0, 0, 0.0])
        total[0] += 1
        total[1] += row["calls"]
        total[2] += row["time_ms"]
    summary = "; ".join(f"{kind}: {int(t[0])} ops, {int(t[1])} calls, {t[2]:.2f} ms"
                        for kind, t in totals.items())
    width = max(len(row["op"]) for row in rows)
    lines = ["torch_infini operator coverage (host time, inclusive)", summary,
             f"{'operator':<{width}}  {'kind':<11}  {'calls':>8}  {'total ms':>10}  {'mean us':>9}"]
    for row in rows:
        mean_us = 1000.0 * row["time_ms"] / row["calls"] if row["calls"] else 0.0
        lines.append(f"{row['op']:<{width}}  {row['kind']:<11}  {row['calls']:>8}  "
                     f"{row['time_ms']:>10.3f}  {mean_us:>9.1f}")
    return "\n".join(lines)


def _report_requested() -> bool:
    """TORCH_INFINI_OP_REPORT as a switch; a malformed value names the variable."""
    return _env.switch(REPORT_VARIABLE)


def _print_report_at_exit() -> None:
    print(format_coverage(), file=sys.stderr)


def _setup_from_environment() -> None:
    """At import: with TORCH_INFINI_OP_REPORT=1, record from the start and
    print the report to stderr at exit."""
    if _report_requested():
        import atexit

        start_recording()
        atexit.register(_print_report_at_exit)
