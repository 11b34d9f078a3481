"""benchmarks/run.py: runs, and writes the documented JSON schema.

The output's shape only: timings are never asserted (performance is
measured by benchmarks/, on an idle machine), and the child processes have
a hang guard, not a time limit. The subsets are the smallest cases of each
kind, in --quick mode with few short repetitions: a synchronized and a
queued add, the MLP forward, the MLP training step, idle and beside a
CPU-bound process.
"""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys

import pytest

import torch_infini
from hang_guard import HANG_GUARD_S

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RUN = os.path.join(REPO, "benchmarks", "run.py")
KEYS = {"case", "infini_s", "reference_s", "ratio", "reference"}


def _run(*args: str, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, RUN, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@pytest.fixture(scope="module")
def quick_subset(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench") / "out.json"
    proc = _run("--quick", "--reps", "3", "--rep-ms", "5", "--cases", "^add/sync/1Ki", "^add/queued1000/1Ki", "^mlp/",
                "--contended",
                "--json", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(path) as f:
        return proc.stdout, json.load(f)


def _check_schema(records: list) -> None:
    assert isinstance(records, list) and records
    names = [r["case"] for r in records]
    assert len(names) == len(set(names)), "case names must be unique"
    for rec in records:
        assert isinstance(rec, dict)
        assert KEYS <= set(rec), rec
        assert set(rec) <= KEYS | {"extra"}, f"extra keys belong inside 'extra': {rec}"
        assert isinstance(rec["case"], str) and rec["case"]
        assert rec["reference"] in {"cpu", "memcpy"}
        extra = rec.get("extra", {})
        assert isinstance(extra, dict)
        if rec["infini_s"] is None:  # skipped: the reason is in extra
            assert isinstance(extra.get("skipped"), str) and extra["skipped"]
            assert rec["ratio"] is None
            continue
        assert "skipped" not in extra
        for key in ("infini_s", "reference_s", "ratio"):
            assert _is_number(rec[key]) and rec[key] > 0, (key, rec)
        assert rec["ratio"] == pytest.approx(rec["infini_s"] / rec["reference_s"], rel=1e-9)


def test_json_is_a_list_of_case_records(quick_subset):
    _check_schema(quick_subset[1])


def test_subset_selects_the_add_cases(quick_subset):
    _, records = quick_subset
    names = {r["case"] for r in records}
    assert all(n.startswith(("add/sync/1Ki", "add/queued1000/1Ki", "mlp/")) for n in names), names
    measured = [r for r in records if r["case"].startswith("add/") and r["infini_s"] is not None]
    assert any("sync" in r["case"] for r in measured)
    assert any("queued" in r["case"] for r in measured)
    for rec in records:
        if rec["case"].startswith("add/"):
            assert rec["reference"] == "cpu"
            assert "wrong_result" not in rec.get("extra", {}), rec


def test_mlp_case_runs_or_is_skipped_with_the_operator(quick_subset):
    _, records = quick_subset
    (mlp,) = [r for r in records if r["case"].startswith("mlp/") and "contended" not in r["extra"]]
    if mlp["infini_s"] is None:
        assert "aten::" in mlp["extra"]["skipped"] or "not" in mlp["extra"]["skipped"]
    else:
        assert "wrong_result" not in mlp.get("extra", {})


def test_table_and_header_are_printed(quick_subset):
    stdout, records = quick_subset
    d = torch_infini.diagnostics()
    assert f"provider:  {d['provider']}" in stdout
    assert "torch_infini" in stdout and "cpu_count=" in stdout
    for rec in records:
        assert rec["case"] in stdout


def test_a_provider_that_is_not_selected_fails_clearly():
    if torch_infini.diagnostics()["infini_stack_compiled"]:
        pytest.skip("the Infini stack is compiled in: --provider infini can be selected")
    proc = _run("--quick", "--provider", "infini", "--cases", "add/sync/1Ki", timeout=HANG_GUARD_S)
    assert proc.returncode == 2
    assert "TORCH_INFINI_PROVIDER=infini" in proc.stderr


def test_the_cpu_fallback_is_never_timed(tmp_path):
    """With TORCH_INFINI_CPU_FALLBACK=1 in the environment, a case that needs
    an operator without an infini kernel is still skipped, not timed on the CPU;
    where every operator is native (the host runtime) the case is timed."""
    path = tmp_path / "out.json"
    env = dict(os.environ, TORCH_INFINI_CPU_FALLBACK="1")
    proc = subprocess.run([sys.executable, RUN, "--quick", "--cases", "^mlp/", "--json", str(path)], cwd=REPO,
                          capture_output=True, text=True, timeout=HANG_GUARD_S, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(path) as f:
        (mlp,) = json.load(f)
    if torch_infini.diagnostics()["provider"] == "host":
        assert mlp["infini_s"] is not None and "skipped" not in mlp["extra"]
    elif mlp["infini_s"] is None:
        assert "aten::" in mlp["extra"]["skipped"]


TRAIN_CASES = {"mlp"}  # the smallest; the models' steps against the CPU are tests/models' concern


@pytest.fixture(scope="module")
def training_markdown(tmp_path_factory):
    """A training step and a synchronized add, as Markdown (3 repetitions
    of ~2 ms: the schema, not the figures)."""
    path = tmp_path_factory.mktemp("bench") / "train.json"
    proc = _run("--quick", "--reps", "3", "--rep-ms", "2", "--cases", "^train/mlp/", "^add/sync/1Ki",
                "--markdown", "--json", str(path))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(path) as f:
        return proc.stdout, json.load(f)


def test_training_steps_match_the_cpu_and_follow_the_schema(training_markdown):
    _, records = training_markdown
    _check_schema(records)
    idle = [r for r in records if r["case"].startswith("train/")]
    assert {r["case"].split("/")[1].split("-")[0] for r in idle} == TRAIN_CASES
    for rec in idle:
        extra = rec["extra"]
        assert "wrong_result" not in extra, rec  # checked against the CPU after the warm-up step
        if rec["infini_s"] is None:  # only where the build cannot run it, with the reason
            assert not extra.get("error"), rec
            continue
        assert extra["parameters"] > 0 and extra["unit"].startswith("training step")


def test_contended_cases_are_their_own_records_and_burners_are_gone(quick_subset):
    _, records = quick_subset
    names = [r["case"] for r in records]
    idle = [n for n in names if not n.endswith(" [contended]")]
    contended = [n for n in names if n.endswith(" [contended]")]
    assert sorted(n[: -len(" [contended]")] for n in contended) == sorted(idle)
    for rec in records:
        if not rec["case"].endswith(" [contended]"):
            assert "contended" not in rec["extra"]
            continue
        info = rec["extra"]["contended"]
        assert info["burners"] == 1 and len(info["burner_pids"]) == 1
        if rec["infini_s"] is not None:
            assert info["burner_alive_at_end"] is True  # it ran through the whole measurement
        for pid in info["burner_pids"]:  # killed and reaped: gone, or the pid reused by another program
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    assert b"getppid" not in f.read(), f"burner {pid} still runs"
            except FileNotFoundError:
                pass


def test_markdown_names_the_command_date_machine_and_load(training_markdown):
    stdout, records = training_markdown
    first = stdout.splitlines()[0]
    assert first.startswith("`python benchmarks/run.py --quick") and re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", first)
    assert "usable cores" in stdout and "load average before the run" in stdout
    assert stdout.count("| case | infini | reference | ratio | note |") == 1
    rows = {line.split(" | ")[0].lstrip("| ") for line in stdout.splitlines() if line.startswith("| ")}
    assert {r["case"] for r in records} <= rows


def test_cpu_references_are_timed_in_a_clean_process(quick_subset):
    """PyTorch CPU references run in benchmarks/clean_reference.py's process
    (never imported torch_infini), the same in its process under
    --reference-in-process."""
    _, records = quick_subset
    for rec in records:
        if rec["infini_s"] is not None:
            assert rec["extra"]["reference_process"] == "clean", rec
    proc = _run("--quick", "--reps", "2", "--rep-ms", "2", "--cases", "^add/sync/1Ki", "^beside/",
                "--reference-in-process")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "timed in this process (--reference-in-process)" in proc.stdout
    beside = next(line for line in proc.stdout.splitlines() if line.startswith("beside/"))
    assert "-" in beside.split()[1:3]  # skipped: the case compares this process with a clean one


def test_clean_reference_process_serves_a_case_without_torch_infini():
    sys.path.insert(0, os.path.join(REPO, "benchmarks"))
    try:
        from clean_reference import CleanReference
    finally:
        sys.path.pop(0)
    clean = CleanReference(quick=True)
    try:
        assert clean.setup("add/sync/1Ki") is None
        n = clean.calibrate(0.002)
        assert n >= 1 and clean.rep(n) > 0
        clean.release()
        with open(f"/proc/{clean.pid}/maps") as f:
            assert "torch_infini" not in f.read()
    finally:
        clean.close()
