"""The stack suite's counts on the selected provider (suite.json): a chosen,
bounded part of tests/, run in parallel shards until its time budget.

    python tools/gpu_check/suite.py OUT_DIR [--budget S] [--shards N]

The files of SUITE, in that order, are dealt round-robin to N pytest
processes (default: a quarter of the cores, at most 4) that share the
device; each test's outcome is logged as it ends (suite_plugin.py), so a
shard stopped by the budget still counts what it ran, and the tests it did
not reach are counted as ``not_run`` per file. The whole suite takes about
ten minutes on two cores; this part has two or three.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ResultFile, infini_status, repo_root

#: What runs, most telling first: the device contracts, memory, streams and
#: copies, then the operator tests, then the databases' and models' tests
#: (each file's tests in its own order). The model suite needs transformers,
#: which the GPU machine lacks: not listed.
SUITE = (
    "tests/test_device.py",
    "tests/test_diagnostics.py",
    "tests/conformance",
    "tests/test_copy.py",
    "tests/test_memory.py",
    "tests/test_allocation.py",
    "tests/test_streams.py",
    "tests/test_events.py",
    "tests/test_pinned.py",
    "tests/ops/test_add.py",
    "tests/ops/test_matmul.py",
    "tests/ops/test_elementwise.py",
    "tests/ops/test_reductions.py",
    "tests/ops/test_softmax_norm.py",
    "tests/ops/test_views.py",
    "tests/ops/test_indexing.py",
    "tests/ops/test_infini_kernels.py",
    "tests/ops/test_fill.py",
    "tests/ops/test_bool_operands.py",
    "tests/ops/test_fused_ops.py",
    "tests/ops/test_decompositions.py",
    "tests/ops/test_random.py",
    "tests/test_infiniops_binding.py",
    "tests/test_backend_support.py",
    "tests/test_random_generators.py",
    "tests/test_serialization.py",
    "tests/test_dlpack.py",
    "tests/test_autocast.py",
    "tests/test_amp_training.py",
    "tests/test_rnn_cells.py",
    "tests/nn",
    "tests/optim",
)


def aggregate(files: list[Path]) -> dict:
    collected: dict[str, int] = {}
    outcomes = collections.Counter()
    per_file: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures: dict[str, str] = {}
    for path in files:
        if not path.is_file():
            continue
        for line in path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut by the kill
            if "collected" in record:
                collected.update(record["collected"])
                continue
            outcome = record["outcome"]
            outcomes[outcome] += 1
            per_file[record["test"].split("::", 1)[0]][outcome] += 1
            if outcome in ("failed", "error", "xpassed"):
                failures[record["test"]] = f"{outcome}: {record['message']}"
    for name, count in collected.items():
        ran = sum(per_file[name].values())
        per_file[name]["not_run"] = max(0, count - ran)
    outcomes["not_run"] = sum(c["not_run"] for c in per_file.values())
    return {"collected": sum(collected.values()), "counts": dict(outcomes),
            "per_file": {name: dict(c) for name, c in sorted(per_file.items())},
            "failures": dict(sorted(failures.items())[:200]), "failures_listed": min(len(failures), 200),
            "failures_total": len(failures)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--budget", type=float, default=150)
    parser.add_argument("--shards", type=int, default=0, help="pytest processes (default: cores / 4, at most 4)")
    args = parser.parse_args()
    result = ResultFile(args.out, "suite.json", "suite", args.budget)
    root = repo_root()
    result.step("infini", infini_status)
    files = [f for f in SUITE if (root / f).exists()]
    shards = args.shards or max(1, min(4, (os.cpu_count() or 1) // 4))
    # Not in OUT_DIR: the check returns at most 8 files.
    work = Path(tempfile.mkdtemp(prefix="gpu-check-suite-", dir=os.environ.get("GPU_CHECK_WORK")))
    logs = [work / f"shard{i}.jsonl" for i in range(shards)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).resolve().parent)]
                                                      + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]))
    procs = []
    for i in range(shards):
        mine = files[i::shards]
        if not mine:
            continue
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "suite_plugin",
                   "--rootdir", str(root), *mine]
        with open(work / f"shard{i}.log", "w") as output:
            procs.append(subprocess.Popen(command, cwd=root, env=dict(env, GPU_CHECK_RESULTS=str(logs[i])),
                                          stdout=output, stderr=subprocess.STDOUT))
    result.update(files=files, shards=shards, missing_files=[f for f in SUITE if f not in files])
    stopped = False
    while any(p.poll() is None for p in procs):
        if result.left() < 8:
            for p in procs:
                if p.poll() is None:
                    p.kill()
            stopped = True
            break
        time.sleep(2)
        result.update(**aggregate(logs))
    for p in procs:
        p.wait()
    tails = {f"shard{i}": (work / f"shard{i}.log").read_text(errors="replace").splitlines()[-6:]
             for i in range(len(procs))}
    result.update(**aggregate(logs), stopped_by_budget=stopped, exit_codes=[p.returncode for p in procs],
                  shard_output_tails=tails, status="done")


if __name__ == "__main__":
    main()
