"""A pytest plugin for the GPU check's suite part (``-p suite_plugin``):
appends each test's outcome to ``GPU_CHECK_RESULTS`` (JSON lines) as it
happens, so the counts survive a run stopped by its time limit."""

from __future__ import annotations

import collections
import json
import os


def _write(record: dict) -> None:
    with open(os.environ["GPU_CHECK_RESULTS"], "a") as f:
        f.write(json.dumps(record) + "\n")


def pytest_collection_modifyitems(session, config, items) -> None:
    per_file = collections.Counter(item.nodeid.split("::", 1)[0] for item in items)
    _write({"collected": dict(per_file)})


def pytest_runtest_logreport(report) -> None:
    if report.when == "call" or report.outcome != "passed":
        if hasattr(report, "wasxfail"):
            outcome = "xfailed" if report.outcome == "skipped" else "xpassed"
        elif report.when != "call" and report.outcome == "failed":
            outcome = "error"
        else:
            outcome = report.outcome
        message = ""
        if report.outcome != "passed" or outcome == "xpassed":
            text = report.longreprtext or ""
            lines = [line for line in text.splitlines() if line.startswith("E ")] or text.splitlines()[-1:]
            message = (lines[0] if lines else "")[:300]
        _write({"test": report.nodeid, "when": report.when, "outcome": outcome, "message": message,
                "duration": round(report.duration, 3)})
