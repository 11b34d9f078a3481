"""Launching a distributed test run: N ranks of worker.py on localhost, bounded in time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from hang_guard import HANG_GUARD_S

WORKER = Path(__file__).with_name("worker.py")


def launch(world_size: int, backend: str, timeout: float = HANG_GUARD_S, worker: Path = WORKER) -> dict:
    """Runs every scenario of ``worker`` (worker.py by default) on
    ``world_size`` ranks, each started as ``worker RANK WORLD_SIZE STORE_FILE
    OUT_DIR BACKEND`` and writing ``OUT_DIR/rank<r>.json``.

    Returns ``{"ranks": [rank r's JSON, ...], "error": str | None}`` (worker.py's:
    ``{scenario: None | traceback}``);
    ``error`` says why a rank gave no results (exit status, timeout, stderr tail).
    The ranks meet through a FileStore and gloo uses the loopback interface
    only (127.0.0.1); every rank is killed at ``timeout``."""
    with tempfile.TemporaryDirectory(prefix="infini-dist-") as tmp:
        env = dict(os.environ)
        env.pop("TORCH_INFINI_DISTRIBUTED_STAGING", None)  # the worker sets it per group
        env.update({
            "TORCH_INFINI_HOST_DEVICES": str(world_size),
            "GLOO_SOCKET_IFNAME": "lo",
            "OMP_NUM_THREADS": "1",
            "PYTHONWARNINGS": "ignore",
        })
        store = os.path.join(tmp, "store")
        procs = []
        logs = []
        for rank in range(world_size):
            log = open(os.path.join(tmp, f"rank{rank}.log"), "w+")
            logs.append(log)
            procs.append(subprocess.Popen(
                [sys.executable, str(worker), str(rank), str(world_size), store, tmp, backend],
                env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = time.monotonic() + timeout
        timed_out = False
        for p in procs:
            try:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        ranks, problems = [], []
        for rank, (p, log) in enumerate(zip(procs, logs)):
            log.seek(0)
            tail = log.read()[-3000:]
            log.close()
            result = Path(tmp, f"rank{rank}.json")
            if result.is_file():
                ranks.append(json.loads(result.read_text()))
            else:
                ranks.append({})
                why = "timed out" if timed_out and p.returncode in (-9, None) else f"exit status {p.returncode}"
                problems.append(f"rank {rank} gave no results ({why}):\n{tail}")
        return {"ranks": ranks, "error": "\n".join(problems) or None}
