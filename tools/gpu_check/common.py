"""Shared by the GPU check's parts (tools/gpu_check/*.py): result files that
exist from a part's first second, time budgets, and what the machine offers.

Every part writes one JSON file into the output folder: first a record saying
it started, then its result. A part killed by its time limit or a crash
leaves the first record, so the summary says which part did not finish
instead of losing it.
"""

from __future__ import annotations

import json
import os
import time
import traceback
from pathlib import Path
from typing import Any, Callable


def repo_root() -> Path:
    """The torch-infini checkout whose tests/, tools/ and benchmarks/ the parts
    use: ``GPU_CHECK_REPO`` (run_check.sh sets it to the folder it runs in),
    else the checkout these scripts are in."""
    return Path(os.environ.get("GPU_CHECK_REPO") or Path(__file__).resolve().parents[2])


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:400]


class ResultFile:
    """One part's JSON result, rewritten whole at every update (atomically:
    a kill between two writes leaves the previous one)."""

    def __init__(self, out_dir: str | Path, name: str, part: str, budget_s: float) -> None:
        self.path = Path(out_dir) / name
        self.started = time.monotonic()
        self.budget_s = budget_s
        self.data: dict[str, Any] = {"part": part, "status": "started: did not finish (killed by its time "
                                     "limit, or crashed; see log.txt)", "budget_s": budget_s}
        self.write()

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self) -> float:
        return self.budget_s - self.elapsed()

    def update(self, **fields: Any) -> None:
        self.data.update(fields)
        self.data["elapsed_s"] = round(self.elapsed(), 2)
        self.write()

    def write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        os.replace(tmp, self.path)

    def step(self, key: str, fn: Callable[[], Any]) -> Any:
        """Runs ``fn``, storing its value (or its error) under ``key``; a
        failing step never stops the part's other steps."""
        try:
            value = fn()
        except Exception as error:  # noqa: BLE001  (recorded, then the next step runs)
            value = {"error": first_line(error), "traceback": traceback.format_exc()[-2000:]}
        self.data[key] = value
        self.update()
        return value


def cuda_status() -> tuple[bool, str]:
    """Whether PyTorch's ``cuda`` device can be used here, and why not."""
    import torch

    if torch.cuda.is_available():
        return True, torch.cuda.get_device_name(0)
    try:
        torch.cuda.init()
    except Exception as error:  # noqa: BLE001
        return False, f"skipped: no CUDA device ({first_line(error)})"
    return False, "skipped: no CUDA device (torch.cuda.is_available() is False)"


def infini_status() -> dict[str, Any]:
    """The provider and backend torch_infini selected, and why."""
    import torch_infini  # noqa: F401
    from torch_infini import _C

    info = _C._provider_info()
    return {"provider": info["provider"], "backend": info["backend"], "reason": info["reason"],
            "devices": int(info["device_count"])}


def infini_is_accelerator(status: dict[str, Any]) -> bool:
    """Whether infini runs on an accelerator (not InfiniRT's CPU backend or the host runtime)."""
    return status["provider"] == "infini" and status["backend"] != "cpu"


def refused(error: BaseException) -> bool:
    """Whether ``error`` is the provider refusing an operator it has no kernel
    for (the stack's InfiniOps lacks it), which the CPU fallback could run."""
    return isinstance(error, NotImplementedError) and "TORCH_INFINI_CPU_FALLBACK" in str(error)


def with_cpu_fallback(fn: Callable[[], Any]) -> tuple[Any, dict[str, int]]:
    """Runs ``fn`` with torch-infini's CPU fallback on; returns its value and
    the calls of each operator that ran on the CPU (the coverage record's
    ``fallback`` rows), so a figure made so says what it leaned on."""
    import torch_infini.fallback as fallback

    fallback.reset_coverage()
    with fallback.enabled():
        value = fn()
    ops: dict[str, int] = {}
    for row in fallback.coverage():
        if row["kind"] == "fallback":
            ops[row["op"]] = ops.get(row["op"], 0) + int(row["calls"])
    return value, ops
