"""tools/report_api_gaps.py: the torch.cuda -> torch.infini gap report.

Runs the tool as users do (a subprocess) for the reports and the exit
statuses, and checks its signature comparison in-process.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "report_api_gaps.py"
PROFILE = ROOT / "tests" / "conformance" / "api_profile.json"
CLASSES = ("required", "planned", "excluded", "unclassified")

# A small profile: a few symbols of each status; everything else unclassified.
# `caching_allocator_alloc` is required although torch.infini lacks it: a gap, reported
# and never fatal.
SMALL_PROFILE = {
    "schema_version": 1,
    "reference": "torch.cuda",
    "target": "torch.infini",
    "symbols": {
        "current_stream": {"status": "required", "contracts": ["test_contract_streams.py::test_set_stream_selects_and_none_is_noop"]},
        "Event": {"status": "required", "contracts": ["test_contract_events.py::test_event_wait_orders_another_stream"]},
        "caching_allocator_alloc": {"status": "required", "contracts": ["test_memory.py::test_caching_allocator_alloc"]},
        "get_rng_state": {"status": "planned", "reason": "RNG: issue Randomness"},
        "nvtx": {"status": "excluded", "reason": "CUDA-specific: NVTX"},
        "CUDAGraph": {"status": "excluded", "reason": "CUDA-specific: graphs"},
        "no_such_symbol": {"status": "planned", "reason": "stale on purpose"},
        # A name of a later PyTorch than the running one: not stale here.
        "later_symbol": {"status": "planned", "reason": "comes with a later release", "since": "99.0"},
        # A name an earlier PyTorch had and the running one dropped: not stale either.
        "dropped_symbol": {"status": "excluded", "reason": "an earlier release had it", "until": "1.0"},
    },
}


def _command(profile: Path, markdown: Path, json_path: Path, *extra: str) -> list[str]:
    return [sys.executable, str(TOOL), "--profile", str(profile), "--markdown", str(markdown), "--json", str(json_path), *extra]


def run_tool(profile: Path, markdown: Path, json_path: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(_command(profile, markdown, json_path, *extra), capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=ROOT)


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict:
    """Both full runs, started together (each imports torch)."""
    tmp = tmp_path_factory.mktemp("gap_reports")
    small = tmp / "small_profile.json"
    small.write_text(json.dumps(SMALL_PROFILE), encoding="utf-8")
    jobs = {
        "small": (small, tmp / "small.md", tmp / "small.json", ("--no-accelerator-probe",)),
        "real": (PROFILE, tmp / "real.md", tmp / "real.json", ()),
    }
    running = {
        name: subprocess.Popen(_command(p, m, j, *extra), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp)
        for name, (p, m, j, extra) in jobs.items()
    }
    out = {}
    for name, proc in running.items():
        stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
        _p, md, js, _extra = jobs[name]
        out[name] = {"rc": proc.returncode, "stdout": stdout, "stderr": stderr, "md": md, "json": js}
    return out


def _loaded(run: dict) -> tuple[dict, str]:
    assert run["rc"] == 0, run["stderr"][-3000:]
    return json.loads(run["json"].read_text()), run["md"].read_text()


# --- a valid profile ------------------------------------------------------------------


def test_small_profile_writes_both_reports_with_every_class(reports):
    data, md = _loaded(reports["small"])
    for cls in CLASSES:
        assert data["symbols"][cls], f"class {cls} is empty"
        assert data["counts"][cls] == len(data["symbols"][cls])
    assert sum(data["counts"][c] for c in CLASSES) == data["counts"]["reference_symbols"]
    names = {c: {r["name"] for r in data["symbols"][c]} for c in CLASSES}
    assert names["required"] == {"current_stream", "Event", "caching_allocator_alloc"}
    assert names["planned"] == {"get_rng_state"}
    assert names["excluded"] == {"nvtx", "CUDAGraph"}
    assert "memory_allocated" in names["unclassified"]
    assert data["stale_profile_entries"] == ["no_such_symbol"]


def test_report_records_presence_kind_and_signature(reports):
    data, _md = _loaded(reports["small"])
    rows = {r["name"]: r for c in CLASSES for r in data["symbols"][c]}
    assert rows["current_stream"]["kind"] == "function"
    assert rows["current_stream"]["target_present"] is True
    assert rows["current_stream"]["signature"] == "compatible"
    assert rows["Event"]["kind"] == "class"
    assert rows["nvtx"]["kind"] == "module"
    assert rows["caching_allocator_alloc"]["target_present"] is False
    assert rows["caching_allocator_alloc"]["target_kind"] == "absent"
    assert rows["get_rng_state"]["reason"] == "RNG: issue Randomness"
    assert rows["memory_allocated"]["target_present"] is True
    assert {r["signature"] for r in rows.values()} <= {"compatible", "incompatible", "unknown", "n/a"}


def test_gaps_never_fail_the_command(reports):
    data, md = _loaded(reports["small"])
    gaps = {g["name"]: g["issues"] for g in data["required_gaps"]}
    assert "caching_allocator_alloc" in gaps
    assert any("absent" in issue for issue in gaps["caching_allocator_alloc"])
    assert "caching_allocator_alloc" in md


def test_markdown_is_readable_on_its_own(reports):
    data, md = _loaded(reports["small"])
    assert md.startswith("# ")
    assert "## Summary" in md
    assert "| Class | Symbols |" in md
    for cls in CLASSES:
        p = data["counts_by_class"][cls]
        assert f"| {cls} | {p['symbols']} |" in md
    headings = [line for line in md.splitlines() if line.startswith("## ")]
    order = [h.split()[1] for h in headings]
    assert order[:5] == ["Summary", "Required", "Planned", "Excluded", "Unclassified"]
    assert md.index("## Summary") < md.index("## Required")
    assert "`get_rng_state`" in md and "RNG: issue Randomness" in md
    assert "`memory_allocated`" in md


def test_real_profile_classifies_everything(reports):
    data, md = _loaded(reports["real"])
    assert data["counts"]["unclassified"] == 0
    assert data["counts"]["required"] >= 20
    assert data["stale_profile_entries"] == []
    for row in data["symbols"]["required"]:
        assert row["target_present"] and row["in_target_all"], row["name"]
        assert row["contracts"], row["name"]
    assert "None: the profile classifies every public symbol." in md


def test_accelerator_functions_are_probed(reports):
    data, md = _loaded(reports["real"])
    rows = {r["name"]: r for r in data["accelerator"]["functions"]}
    import torch

    assert set(rows) == set(torch.accelerator.__all__)
    for name in ("current_accelerator", "device_count", "current_stream", "synchronize", "memory_allocated"):
        assert rows[name]["status"] == "ok", rows[name]
    assert {r["status"] for r in rows.values()} <= {"ok", "error", "crashed", "not called"}
    assert sum(data["accelerator"]["counts"].values()) == len(rows)
    assert "## `torch.accelerator` functions with infini" in md


def test_no_probe_lists_accelerator_functions_as_not_called(reports):
    data, _md = _loaded(reports["small"])
    assert {r["status"] for r in data["accelerator"]["functions"]} == {"not called"}


# --- invalid profiles and outputs ---------------------------------------------------------


def _bad_profile(tmp_path: Path, text: str) -> subprocess.CompletedProcess:
    profile = tmp_path / "profile.json"
    profile.write_text(text, encoding="utf-8")
    return run_tool(profile, tmp_path / "out.md", tmp_path / "out.json")


def _variant(**changes) -> str:
    data = json.loads(json.dumps(SMALL_PROFILE))
    for name, entry in changes.items():
        if entry is None:
            data["symbols"].pop(name, None)
        else:
            data["symbols"][name] = entry
    return json.dumps(data)


@pytest.mark.parametrize(
    "text, needle",
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "JSON object"),
        (_variant(current_stream={"status": "mandatory", "contracts": ["x.py::t"]}), "unknown status"),
        (_variant(current_stream={"status": "required", "contracts": []}), "required without contracts"),
        (_variant(current_stream={"status": "required"}), "required without contracts"),
        (_variant(get_rng_state={"status": "planned"}), "planned without a reason"),
        (_variant(nvtx={"status": "excluded", "reason": "  "}), "excluded without a reason"),
        (_variant(nvtx={"status": "excluded", "reason": "x", "owner": "me"}), "unknown field"),
        (_variant(nvtx={"status": "excluded", "reason": "x", "since": "soon"}), "'since' must be a PyTorch release"),
        (_variant(nvtx={"status": "excluded", "reason": "x", "until": "never"}), "'until' must be a PyTorch release"),
        (json.dumps({**SMALL_PROFILE, "schema_version": 2}), "schema_version"),
        (json.dumps({k: v for k, v in SMALL_PROFILE.items() if k != "symbols"}), "'symbols'"),
        (json.dumps({**SMALL_PROFILE, "reference": "torch.xpu"}), "reference"),
    ],
    ids=["bad-json", "not-object", "unknown-status", "required-empty-contracts", "required-no-contracts",
         "planned-no-reason", "excluded-blank-reason", "unknown-field", "bad-since", "bad-until", "schema-version", "no-symbols",
         "wrong-reference"],
)
def test_invalid_profile_exits_non_zero(tmp_path, text, needle):
    proc = _bad_profile(tmp_path, text)
    assert proc.returncode == 2, proc.stderr
    assert "invalid profile" in proc.stderr
    assert needle in proc.stderr
    assert not (tmp_path / "out.md").exists()
    assert not (tmp_path / "out.json").exists()


def test_missing_profile_exits_non_zero(tmp_path):
    proc = run_tool(tmp_path / "absent.json", tmp_path / "out.md", tmp_path / "out.json")
    assert proc.returncode == 2
    assert "cannot read" in proc.stderr


def test_unwritable_markdown_path_exits_non_zero(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    proc = run_tool(PROFILE, blocker / "report.md", tmp_path / "out.json")
    assert proc.returncode == 3, proc.stderr
    assert "cannot write" in proc.stderr
    assert not (tmp_path / "out.json").exists()


def test_json_path_that_is_a_directory_exits_non_zero(tmp_path):
    proc = run_tool(PROFILE, tmp_path / "out.md", tmp_path)
    assert proc.returncode == 3, proc.stderr
    assert "cannot write" in proc.stderr


def test_missing_output_directory_exits_non_zero(tmp_path):
    proc = run_tool(PROFILE, tmp_path / "no" / "such" / "dir" / "out.md", tmp_path / "out.json")
    assert proc.returncode == 3
    assert "does not exist" in proc.stderr


@pytest.mark.skipif(os.geteuid() == 0, reason="root can write into read-only directories")
def test_read_only_directory_exits_non_zero(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    try:
        proc = run_tool(PROFILE, ro / "out.md", tmp_path / "out.json")
    finally:
        ro.chmod(0o700)
    assert proc.returncode == 3


# --- the comparison, in-process ---------------------------------------------------------


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("_report_api_gaps_under_test", TOOL)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _sig(fn) -> inspect.Signature:
    return inspect.signature(fn)


def test_signature_comparison(tool):
    def ref(device=None, priority=0, **kwargs): ...
    def same(device=None, priority=0, **kwargs): ...
    def renamed(dev=None, priority=0, **kwargs): ...
    def no_default(device, priority=0, **kwargs): ...
    def extra_required(device=None, priority=0, flag=None, *, must, **kwargs): ...
    def extra_optional(device=None, priority=0, verbose=False, **kwargs): ...
    def no_kwargs(device=None, priority=0): ...
    def other_default(device=None, priority=-1, **kwargs): ...

    assert tool.compare_signatures(_sig(ref), _sig(same)) == ([], [])
    problems, _ = tool.compare_signatures(_sig(ref), _sig(renamed))
    assert any("'device'" in p for p in problems)
    problems, _ = tool.compare_signatures(_sig(ref), _sig(no_default))
    assert problems == ["parameter 'device' has no default"]
    problems, _ = tool.compare_signatures(_sig(ref), _sig(extra_required))
    assert problems == ["extra required parameter 'must'"]
    problems, notes = tool.compare_signatures(_sig(ref), _sig(extra_optional))
    assert problems == [] and notes == ["extra optional parameter 'verbose'"]
    problems, _ = tool.compare_signatures(_sig(ref), _sig(no_kwargs))
    assert problems == ["does not accept **kwargs"]
    problems, notes = tool.compare_signatures(_sig(ref), _sig(other_default))
    assert problems == [] and "default of 'priority'" in notes[0]


def test_signature_status_kinds(tool):
    import torch

    import torch_infini  # noqa: F401

    assert tool.signature_status(torch.cuda.memory_allocated, torch.infini.memory_allocated)[0] == "compatible"
    status, detail = tool.signature_status(torch.cuda.Stream, torch.infini.memory_allocated)
    assert status == "incompatible" and "kind differs" in detail
    assert tool.signature_status(torch.cuda.nvtx, torch.cuda.nvtx)[0] == "n/a"
    assert tool.kind_of(torch.cuda) == "module"
    assert tool.kind_of(torch.cuda.Stream) == "class"
    assert tool.kind_of(torch.cuda.synchronize) == "function"
    assert tool.kind_of(torch.cuda.has_half) == "other"


def test_public_symbols_include_unimported_submodules(tool):
    import torch

    names = tool.public_symbols(torch.cuda)
    assert "comm" in names  # a submodule, whether imported or not
    assert "memory_allocated" in names
    assert not [n for n in names if n.startswith("_")]


def test_default_paths_are_the_profile_and_build_reports(tool, tmp_path, monkeypatch, capsys):
    """Without arguments: the project's profile in, build/reports/ out (never
    the repository's root). The default directory is created."""
    assert tool.DEFAULT_PROFILE == PROFILE
    assert tool.DEFAULT_REPORTS == ROOT / "build" / "reports"
    reports = tmp_path / "not-yet" / "reports"
    monkeypatch.setattr(tool, "DEFAULT_REPORTS", reports)
    assert tool.main(["--no-accelerator-probe"]) == 0
    assert json.loads((reports / "api_gaps.json").read_text())["counts"]["unclassified"] == 0
    assert (reports / "api_gaps.md").read_text().startswith("# ")
    assert str(reports / "api_gaps.md") in capsys.readouterr().out
