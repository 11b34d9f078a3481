#!/usr/bin/env python3
"""Report how torch.infini covers the public torch.cuda API.

    python tools/report_api_gaps.py    # writes build/reports/api_gaps.md and .json

(``--profile``, ``--markdown`` and ``--json`` choose other files; by default
the reports go under ``build/``, which git ignores, never into the
repository's root.)

Compares the full public surface of ``torch.cuda`` (every name of
``dir(torch.cuda)`` and ``torch.cuda.__all__`` without a leading underscore,
plus its submodules) with ``torch.infini``: presence, kind (function, class,
module, other) and signature compatibility (``inspect.signature``, where both
sides have one). Each symbol is put in the class the profile gives it
(``required``, ``planned``, ``excluded``) or ``unclassified``; both reports
list every class with counts. It also calls each harmless ``torch.accelerator``
function with ``infini`` as the accelerator (in a child process, so that a
crash is recorded rather than fatal) and records ok/error/crashed.

Gaps never fail the command. Exit status: 0 when both reports were written;
2 for an invalid profile (unreadable, bad JSON, schema violations such as an
unknown status or a required symbol without contracts); 3 when a report
cannot be written; 4 when torch or torch_infini cannot be imported.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import inspect
import json
import os
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
REFERENCE = "torch.cuda"
TARGET = "torch.infini"
STATUSES = ("required", "planned", "excluded")
CLASSES = STATUSES + ("unclassified",)
# "since": the PyTorch release whose torch.cuda first has the name, for names
# that the oldest supported release lacks (such an entry is not stale there);
# "until": the last release whose torch.cuda has it, for names later releases
# dropped (not stale after it).
ENTRY_FIELDS = {"status", "contracts", "reason", "since", "until"}
TOP_LEVEL_REQUIRED = ("schema_version", "reference", "target", "symbols")

EXIT_OK = 0
EXIT_PROFILE = 2
EXIT_WRITE = 3
EXIT_IMPORT = 4

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PROFILE = REPO_ROOT / "tests" / "conformance" / "api_profile.json"
DEFAULT_REPORTS = REPO_ROOT / "build" / "reports"


class ProfileError(Exception):
    """The profile cannot be used; the message lists every problem found."""


# --------------------------------------------------------------------------
# The profile
# --------------------------------------------------------------------------


def validate_profile(data: Any) -> list[str]:
    """Every problem with a parsed profile (empty when it is valid)."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return [f"the profile must be a JSON object, got {type(data).__name__}"]
    for key in TOP_LEVEL_REQUIRED:
        if key not in data:
            problems.append(f"missing top-level key '{key}'")
    version = data.get("schema_version")
    if "schema_version" in data and (type(version) is not int or version != SCHEMA_VERSION):
        problems.append(f"schema_version must be {SCHEMA_VERSION}, got {version!r}")
    if "reference" in data and data["reference"] != REFERENCE:
        problems.append(f"reference must be '{REFERENCE}', got {data['reference']!r}")
    if "target" in data and data["target"] != TARGET:
        problems.append(f"target must be '{TARGET}', got {data['target']!r}")
    symbols = data.get("symbols")
    if "symbols" in data and not isinstance(symbols, dict):
        problems.append("'symbols' must be an object mapping symbol names to entries")
        symbols = None
    for name, entry in (symbols or {}).items():
        where = f"symbol '{name}'"
        if not name or name.startswith("_"):
            problems.append(f"{where}: names must be public (non-empty, no leading underscore)")
        if not isinstance(entry, dict):
            problems.append(f"{where}: entry must be an object, got {type(entry).__name__}")
            continue
        unknown = set(entry) - ENTRY_FIELDS
        if unknown:
            problems.append(f"{where}: unknown field(s) {sorted(unknown)} (allowed: {sorted(ENTRY_FIELDS)})")
        status = entry.get("status")
        if status not in STATUSES:
            problems.append(f"{where}: unknown status {status!r} (allowed: {', '.join(STATUSES)})")
        contracts = entry.get("contracts", [])
        if not isinstance(contracts, list) or not all(isinstance(c, str) and c for c in contracts):
            problems.append(f"{where}: 'contracts' must be a list of test ids")
            contracts = []
        reason = entry.get("reason", "")
        if not isinstance(reason, str):
            problems.append(f"{where}: 'reason' must be a string")
            reason = ""
        for field in ("since", "until"):
            release = entry.get(field)
            if release is not None and _release(release) is None:
                problems.append(f"{where}: '{field}' must be a PyTorch release such as \"2.12\", got {release!r}")
        if status == "required" and not contracts:
            problems.append(f"{where}: required without contracts (name the tests that gate it)")
        if status in ("planned", "excluded") and not reason.strip():
            problems.append(f"{where}: {status} without a reason")
    return problems


def _release(version: Any) -> tuple[int, int] | None:
    """``"2.12"`` or ``"2.12.0+cpu"`` -> ``(2, 12)``; None if it is no version."""
    import re

    match = re.match(r"^(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return (int(match.group(1)), int(match.group(2))) if match else None


def _outside_its_releases(entry: dict, running) -> bool:
    """Whether the running PyTorch is outside the releases whose torch.cuda
    has the entry's name (its "since" and "until"): then its absence is
    expected, not a stale entry."""
    since, until = entry.get("since"), entry.get("until")
    return bool((since and running < _release(since)) or (until and running > _release(until)))


def load_profile(path: Path) -> dict:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ProfileError(f"cannot read {path}: {e.strerror or e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"{path} is not valid JSON: {e}") from e
    problems = validate_profile(data)
    if problems:
        raise ProfileError(f"{path} is not a valid API profile:\n  - " + "\n  - ".join(problems))
    return data


# --------------------------------------------------------------------------
# Surfaces, kinds and signatures
# --------------------------------------------------------------------------


def submodule_names(module: Any) -> set[str]:
    """The public submodules of a package, imported or not."""
    return {
        info.name
        for info in pkgutil.iter_modules(getattr(module, "__path__", []))
        if not info.name.startswith("_")
    }


def public_symbols(module: Any) -> list[str]:
    """Every public name of ``module``: dir() and __all__ without a leading
    underscore, plus its public submodules (imported or not)."""
    names = {n for n in dir(module) if not n.startswith("_")}
    names |= {n for n in getattr(module, "__all__", ()) if not n.startswith("_")}
    names |= submodule_names(module)
    return sorted(names)


_MISSING = object()


def _lookup(module: Any, name: str) -> Any:
    try:
        return getattr(module, name)
    except Exception:  # noqa: BLE001  (lazy attributes may raise anything)
        return _MISSING


def kind_of(obj: Any) -> str:
    if obj is _MISSING:
        return "absent"
    if inspect.ismodule(obj):
        return "module"
    if inspect.isclass(obj):
        return "class"
    if callable(obj):
        return "function"
    return "other"


def _signature(obj: Any) -> inspect.Signature | None:
    try:
        return inspect.signature(obj)
    except (TypeError, ValueError):
        return None


def compare_signatures(ref: inspect.Signature, tgt: inspect.Signature) -> tuple[list[str], list[str]]:
    """(problems, notes): problems break a call written for ``ref``; notes do not."""
    P = inspect.Parameter
    problems: list[str] = []
    notes: list[str] = []
    rparams = list(ref.parameters.values())
    tparams = list(tgt.parameters.values())
    tmap = tgt.parameters
    t_var_pos = any(p.kind is P.VAR_POSITIONAL for p in tparams)
    t_var_kw = any(p.kind is P.VAR_KEYWORD for p in tparams)
    rpos = [p for p in rparams if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    tpos = [p for p in tparams if p.kind in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    reported: set[str] = set()
    for i, p in enumerate(rpos):
        if i < len(tpos):
            q = tpos[i]
            if q.name != p.name and p.kind is P.POSITIONAL_OR_KEYWORD and p.name not in tmap:
                problems.append(f"parameter '{p.name}' is missing (position {i} is '{q.name}')")
                reported.add(p.name)
            elif q.name != p.name and p.kind is P.POSITIONAL_OR_KEYWORD:
                problems.append(f"parameter '{p.name}' is not at position {i}")
                reported.add(p.name)
            elif p.default is not P.empty and q.default is P.empty:
                problems.append(f"parameter '{p.name}' has no default")
                reported.add(p.name)
        elif not t_var_pos and p.name not in tmap:
            problems.append(f"parameter '{p.name}' is missing")
            reported.add(p.name)
        elif not t_var_pos:
            problems.append(f"parameter '{p.name}' cannot be passed by position")
            reported.add(p.name)
    for p in rparams:
        if p.kind not in (P.POSITIONAL_OR_KEYWORD, P.KEYWORD_ONLY) or p.name in reported:
            continue
        q = tmap.get(p.name)
        if q is None:
            if not t_var_kw:
                problems.append(f"parameter '{p.name}' is missing")
            continue
        if q.kind is P.POSITIONAL_ONLY:
            problems.append(f"parameter '{p.name}' is positional-only")
        elif p.default is not P.empty and q.default is P.empty:
            problems.append(f"parameter '{p.name}' has no default")
        elif p.default is not P.empty and q.default is not P.empty:
            try:
                same = bool(p.default == q.default)
            except Exception:  # noqa: BLE001
                same = False
            if not same:
                notes.append(f"default of '{p.name}' is {q.default!r} (reference {p.default!r})")
    rnames = {p.name for p in rparams}
    for q in tparams:
        if q.kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD) or q.name in rnames:
            continue
        if q.default is P.empty:
            problems.append(f"extra required parameter '{q.name}'")
        else:
            notes.append(f"extra optional parameter '{q.name}'")
    if any(p.kind is P.VAR_POSITIONAL for p in rparams) and not t_var_pos:
        problems.append("does not accept *args")
    if any(p.kind is P.VAR_KEYWORD for p in rparams) and not t_var_kw:
        problems.append("does not accept **kwargs")
    return problems, notes


def signature_status(ref_obj: Any, tgt_obj: Any) -> tuple[str, str]:
    """('compatible'|'incompatible'|'unknown'|'n/a', detail)."""
    rk, tk = kind_of(ref_obj), kind_of(tgt_obj)
    if tk == "absent":
        return "n/a", "absent from the target"
    if rk != tk:
        return "incompatible", f"kind differs: {rk} in {REFERENCE}, {tk} in {TARGET}"
    if rk not in ("function", "class"):
        return "n/a", f"{rk}: no signature to compare"
    rsig, tsig = _signature(ref_obj), _signature(tgt_obj)
    if rsig is None or tsig is None:
        side = REFERENCE if rsig is None else TARGET
        return "unknown", f"no inspectable signature in {side}"
    problems, notes = compare_signatures(rsig, tsig)
    if problems:
        return "incompatible", "; ".join(problems)
    return "compatible", "; ".join(notes)


# --------------------------------------------------------------------------
# torch.accelerator with infini (in a child process: a crash is a result)
# --------------------------------------------------------------------------

# name -> statement; each one is harmless (reads state or sets it to itself).
# Calls known to have crashed come last, so that a crash costs no restart.
ACCELERATOR_PROBES: dict[str, str] = {
    "current_accelerator": "r = A.current_accelerator(); assert r is not None and r.type == 'infini', r",
    "is_available": "r = A.is_available()",
    "device_count": "r = A.device_count()",
    "current_device_index": "r = A.current_device_index()",
    "current_device_idx": "r = A.current_device_idx()",
    "set_device_index": "r = A.set_device_index(A.current_device_index())",
    "set_device_idx": "r = A.set_device_idx(A.current_device_index())",
    "device_index": "with A.device_index(0):\n    r = A.current_device_index()",
    "current_stream": "r = A.current_stream()",
    "set_stream": "r = A.set_stream(A.current_stream())",
    "synchronize": "r = A.synchronize()",
    "get_device_capability": "r = A.get_device_capability()",
    "get_memory_info": "r = A.get_memory_info()",
    "memory_allocated": "r = A.memory_allocated()",
    "max_memory_allocated": "r = A.max_memory_allocated()",
    "memory_reserved": "r = A.memory_reserved()",
    "max_memory_reserved": "r = A.max_memory_reserved()",
    "memory_stats": "r = len(A.memory_stats())",
    "reset_accumulated_memory_stats": "r = A.reset_accumulated_memory_stats()",
    "reset_peak_memory_stats": "r = A.reset_peak_memory_stats()",
    "empty_cache": "r = A.empty_cache()",
    "Graph": "r = A.Graph()",
    "empty_host_cache": "r = A.empty_host_cache()",
}

_CHILD = textwrap.dedent(
    """
    import json, sys, warnings
    warnings.simplefilter("ignore")
    sys.path.append(sys.argv[1])  # the checkout, after an installed torch_infini (as _import_target)
    import torch, torch_infini
    A = torch.accelerator
    torch.empty(1, device="infini")  # initialize the device first
    for name in json.loads(sys.argv[2]):
        print(json.dumps({"start": name}), flush=True)
        try:
            scope = {"A": A, "torch": torch}
            exec(PROBES[name], scope)
            out = {"name": name, "status": "ok", "detail": repr(scope.get("r"))[:200]}
        except BaseException as e:
            out = {"name": name, "status": "error", "detail": f"{type(e).__name__}: {e}"[:300]}
        print(json.dumps(out), flush=True)
    """
)


def _child_source() -> str:
    return f"PROBES = {ACCELERATOR_PROBES!r}\n" + _CHILD


def _start_child(names: list[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", _child_source(), str(REPO_ROOT), json.dumps(names)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


class AcceleratorProbe:
    """Calls the probes in child processes, restarting after a crash."""

    def __init__(self, names: list[str], timeout: float = 120.0):
        self.pending = list(names)
        self.timeout = timeout
        self.results: dict[str, dict] = {}
        self.proc = _start_child(self.pending) if self.pending else None

    def collect(self) -> dict[str, dict]:
        while self.proc is not None:
            try:
                out, err = self.proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                out, err = self.proc.communicate()
                err = f"timed out after {self.timeout:.0f} s"
            started = None
            for line in out.splitlines():
                try:
                    msg = json.loads(line)
                except json.JSONDecodeError:
                    continue
                if "start" in msg:
                    started = msg["start"]
                elif "name" in msg:
                    self.results[msg["name"]] = msg
                    started = None
            rc = self.proc.returncode
            self.pending = [n for n in self.pending if n not in self.results]
            self.proc = None
            if not self.pending:
                break
            if started is None:
                # Died before the first probe (import failure): record it once for all.
                detail = (err or "").strip().splitlines()[-1:] or [f"exit status {rc}"]
                for n in self.pending:
                    self.results[n] = {"name": n, "status": "error", "detail": f"child failed: {detail[0]}"}
                break
            how = f"signal {-rc}" if rc is not None and rc < 0 else f"exit status {rc}"
            self.results[started] = {
                "name": started,
                "status": "crashed",
                "detail": f"the process died ({how}) in this call",
            }
            self.pending = [n for n in self.pending if n != started]
            if self.pending:
                self.proc = _start_child(self.pending)
        return self.results


# --------------------------------------------------------------------------
# The report
# --------------------------------------------------------------------------


def build_report(profile: dict, profile_path: Path, torch: Any, target: Any, accel: dict[str, dict]) -> dict:
    reference = torch.cuda
    ref_names = public_symbols(reference)
    ref_submodules = submodule_names(reference)
    ref_all = set(getattr(reference, "__all__", ()))
    tgt_all = set(getattr(target, "__all__", ()))
    entries = profile["symbols"]
    classes: dict[str, list[dict]] = {c: [] for c in CLASSES}
    for name in ref_names:
        ref_obj = _lookup(reference, name)
        tgt_obj = _lookup(target, name)
        entry = entries.get(name, {})
        status = entry.get("status", "unclassified")
        sig, detail = signature_status(ref_obj, tgt_obj)
        ref_kind = kind_of(ref_obj)
        if ref_kind == "absent" and name in ref_submodules:
            ref_kind = "module"  # a submodule not imported yet
            sig, detail = ("n/a", "module: no signature to compare") if tgt_obj is not _MISSING else (sig, detail)
        classes[status].append(
            {
                "name": name,
                "kind": ref_kind,
                "in_reference_all": name in ref_all,
                "target_present": tgt_obj is not _MISSING,
                "target_kind": kind_of(tgt_obj),
                "in_target_all": name in tgt_all,
                "signature": sig,
                "signature_detail": detail,
                "contracts": list(entry.get("contracts", [])),
                "reason": entry.get("reason", ""),
            }
        )
    running = _release(torch.__version__)
    stale = sorted(n for n in set(entries) - set(ref_names) if not _outside_its_releases(entries[n], running))
    required_gaps = []
    for row in classes["required"]:
        issues = []
        if not row["target_present"]:
            issues.append(f"absent from {TARGET}")
        elif not row["in_target_all"]:
            issues.append(f"not in {TARGET}.__all__")
        if row["signature"] == "incompatible":
            issues.append(f"signature: {row['signature_detail']}")
        if issues:
            required_gaps.append({"name": row["name"], "issues": issues})

    def _count(rows: list[dict], pred) -> int:
        return sum(1 for r in rows if pred(r))

    counts: dict[str, Any] = {"reference_symbols": len(ref_names)}
    per_class = {}
    for c in CLASSES:
        rows = classes[c]
        per_class[c] = {
            "symbols": len(rows),
            "present_in_target": _count(rows, lambda r: r["target_present"]),
            "missing_in_target": _count(rows, lambda r: not r["target_present"]),
            "signature_incompatible": _count(rows, lambda r: r["signature"] == "incompatible"),
        }
        counts[c] = len(rows)
    counts["present_in_target"] = sum(v["present_in_target"] for v in per_class.values())
    counts["missing_in_target"] = sum(v["missing_in_target"] for v in per_class.values())
    counts["signature_incompatible"] = sum(v["signature_incompatible"] for v in per_class.values())
    counts["required_gaps"] = len(required_gaps)
    counts["stale_profile_entries"] = len(stale)

    accel_rows = []
    for name in getattr(torch.accelerator, "__all__", public_symbols(torch.accelerator)):
        if name in accel:
            accel_rows.append(accel[name])
        elif name in ACCELERATOR_PROBES:
            accel_rows.append({"name": name, "status": "not called", "detail": "probes disabled"})
        else:
            accel_rows.append({"name": name, "status": "not called", "detail": "no harmless call known"})
    accel_counts = {s: sum(1 for r in accel_rows if r["status"] == s) for s in ("ok", "error", "crashed", "not called")}

    try:
        import torch_infini

        provider = torch_infini._C._provider_info()
        provider = {"provider": provider.get("provider"), "backend": provider.get("backend")}
        infini_version = getattr(torch_infini, "__version__", "?")
    except Exception:  # noqa: BLE001
        provider, infini_version = {}, "?"

    return {
        "report_schema_version": 1,
        "generated": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "reference": REFERENCE,
        "target": TARGET,
        "profile": str(profile_path),
        "profile_schema_version": profile["schema_version"],
        "torch_version": torch.__version__,
        "torch_infini_version": infini_version,
        "provider": provider,
        "counts": counts,
        "counts_by_class": per_class,
        "symbols": classes,
        "required_gaps": required_gaps,
        "stale_profile_entries": stale,
        "accelerator": {"device_type": "infini", "counts": accel_counts, "functions": accel_rows},
    }


def _cell(value: Any) -> str:
    text = str(value) if value not in (None, "") else "—"
    return text.replace("|", "\\|").replace("\n", " ")


def _yes(flag: bool) -> str:
    return "yes" if flag else "**no**"


def render_markdown(report: dict) -> str:
    c = report["counts"]
    per = report["counts_by_class"]
    lines = [
        f"# API gap report: `{report['reference']}` → `{report['target']}`",
        "",
        f"Generated {report['generated']} with torch {report['torch_version']}, "
        f"torch_infini {report['torch_infini_version']} "
        f"(provider {report['provider'].get('provider', '?')}, backend {report['provider'].get('backend', '?')}), "
        f"from the profile `{report['profile']}` (schema version {report['profile_schema_version']}).",
        "",
        f"The reference surface is every public name of `{report['reference']}` "
        "(`dir()` and `__all__` without a leading underscore, and its submodules). "
        "Classes: **required** (implemented and gated by conformance contracts), **planned** "
        "(to implement, with the reason), **excluded** (will not be implemented, with the reason), "
        "**unclassified** (not in the profile yet). Gaps are reported, never fatal.",
        "",
        "## Summary",
        "",
        "| Class | Symbols | Present in target | Missing in target | Signature incompatible |",
        "|---|---:|---:|---:|---:|",
    ]
    for name in CLASSES:
        p = per[name]
        lines.append(
            f"| {name} | {p['symbols']} | {p['present_in_target']} | {p['missing_in_target']} | "
            f"{p['signature_incompatible']} |"
        )
    lines.append(
        f"| **total** | **{c['reference_symbols']}** | **{c['present_in_target']}** | "
        f"**{c['missing_in_target']}** | **{c['signature_incompatible']}** |"
    )
    lines += ["", f"Required symbols with gaps: {c['required_gaps']}. "
              f"Profile entries not in `{report['reference']}`: {c['stale_profile_entries']}."]
    a = report["accelerator"]["counts"]
    lines += [
        f"`torch.accelerator` with infini: {a['ok']} ok, {a['error']} error, {a['crashed']} crashed, "
        f"{a['not called']} not called.",
        "",
    ]
    if report["required_gaps"]:
        lines += ["### Gaps in required symbols", ""]
        for gap in report["required_gaps"]:
            lines.append(f"- `{gap['name']}`: " + "; ".join(gap["issues"]))
        lines.append("")
    if report["stale_profile_entries"]:
        lines += [f"### Profile entries not found in `{report['reference']}`", ""]
        lines += [f"- `{n}`" for n in report["stale_profile_entries"]]
        lines.append("")

    sym = report["symbols"]
    lines += [f"## Required ({len(sym['required'])})", ""]
    if sym["required"]:
        lines += [
            "| Symbol | Kind | In target | In `__all__` | Signature | Contracts |",
            "|---|---|---|---|---|---|",
        ]
        for r in sym["required"]:
            signature = r["signature"] + (f" ({r['signature_detail']})" if r["signature_detail"] else "")
            lines.append(
                f"| `{r['name']}` | {r['kind']} | {_yes(r['target_present'])} | {_yes(r['in_target_all'])} | "
                f"{_cell(signature)} | {_cell(', '.join(r['contracts']))} |"
            )
    else:
        lines.append("None.")
    lines.append("")
    for status in ("planned", "excluded"):
        rows = sym[status]
        lines += [f"## {status.capitalize()} ({len(rows)})", ""]
        if rows:
            lines += ["| Symbol | Kind | In target | Reason |", "|---|---|---|---|"]
            for r in rows:
                lines.append(
                    f"| `{r['name']}` | {r['kind']} | {'yes' if r['target_present'] else 'no'} | {_cell(r['reason'])} |"
                )
        else:
            lines.append("None.")
        lines.append("")
    rows = sym["unclassified"]
    lines += [f"## Unclassified ({len(rows)})", ""]
    if rows:
        lines += ["| Symbol | Kind | In target | Signature |", "|---|---|---|---|"]
        for r in rows:
            signature = r["signature"] + (f" ({r['signature_detail']})" if r["signature_detail"] else "")
            lines.append(
                f"| `{r['name']}` | {r['kind']} | {'yes' if r['target_present'] else 'no'} | {_cell(signature)} |"
            )
    else:
        lines.append("None: the profile classifies every public symbol.")
    lines += ["", "## `torch.accelerator` functions with infini", ""]
    lines += ["| Function | Result | Detail |", "|---|---|---|"]
    for r in report["accelerator"]["functions"]:
        lines.append(f"| `{r['name']}` | {r['status']} | {_cell(r['detail'])} |")
    lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------


def _check_output_path(path: Path) -> str | None:
    parent = path.parent if str(path.parent) else Path(".")
    if path.exists() and path.is_dir():
        return f"{path} is a directory"
    if not parent.is_dir():
        return f"the directory {parent} does not exist"
    if not os.access(parent, os.W_OK):
        return f"the directory {parent} is not writable"
    return None


def _import_target():
    try:
        import torch_infini  # noqa: F401
    except ImportError:
        sys.path.insert(0, str(REPO_ROOT))
        import torch_infini  # noqa: F401
    import torch

    return torch, torch.infini


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Compare the public torch.cuda API with torch.infini and write Markdown and JSON reports."
    )
    parser.add_argument("--profile", type=Path, default=DEFAULT_PROFILE,
                        help="the API profile (default: tests/conformance/api_profile.json)")
    parser.add_argument("--markdown", type=Path, help="where to write the Markdown report "
                        "(default: build/reports/api_gaps.md)")
    parser.add_argument("--json", type=Path, help="where to write the JSON report (default: build/reports/api_gaps.json)")
    parser.add_argument(
        "--no-accelerator-probe",
        action="store_true",
        help="do not call the torch.accelerator functions (they are listed as 'not called')",
    )
    args = parser.parse_args(argv)
    if args.markdown is None or args.json is None:
        # Only the default directory is created: a path the user names must exist.
        DEFAULT_REPORTS.mkdir(parents=True, exist_ok=True)
        args.markdown = args.markdown or DEFAULT_REPORTS / "api_gaps.md"
        args.json = args.json or DEFAULT_REPORTS / "api_gaps.json"

    try:
        profile = load_profile(args.profile)
    except ProfileError as e:
        print(f"report_api_gaps: invalid profile: {e}", file=sys.stderr)
        return EXIT_PROFILE

    for out in (args.markdown, args.json):
        problem = _check_output_path(out)
        if problem:
            print(f"report_api_gaps: cannot write the report {out}: {problem}", file=sys.stderr)
            return EXIT_WRITE

    probe = None if args.no_accelerator_probe else AcceleratorProbe(list(ACCELERATOR_PROBES))
    try:
        torch, target = _import_target()
    except Exception as e:  # noqa: BLE001
        print(f"report_api_gaps: cannot import torch_infini: {type(e).__name__}: {e}", file=sys.stderr)
        return EXIT_IMPORT
    accel = probe.collect() if probe is not None else {}
    report = build_report(profile, args.profile, torch, target, accel)

    try:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
        args.markdown.write_text(render_markdown(report), encoding="utf-8")
    except OSError as e:
        print(f"report_api_gaps: cannot write the reports: {e}", file=sys.stderr)
        return EXIT_WRITE

    c = report["counts"]
    print(
        f"report_api_gaps: {c['reference_symbols']} {REFERENCE} symbols: {c['required']} required, "
        f"{c['planned']} planned, {c['excluded']} excluded, {c['unclassified']} unclassified; "
        f"{c['required_gaps']} required with gaps. Wrote {args.markdown} and {args.json}."
    )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
