"""Libraries that pick a device pick infini: accelerate's ``Accelerator()``
and transformers' ``Trainer`` train on infini with the switch on (they pick
"cuda") and, with it off, with ``ACCELERATE_TORCH_DEVICE=infini``; their losses
equal the same training on the CPU (library_run.py, one fresh interpreter
per mode)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
import torch
from hang_guard import HANG_GUARD_S
from packaging.version import Version

# accelerate 1.16 finds a PrivateUse1 device itself: it picks "infini" even
# where torch.cuda answers (the switch), and scales fp16 there. 1.15 and
# earlier pick "cuda" under the switch, and without it refuse fp16 on a device
# outside their own list.
ACCELERATE_FINDS_INFINI = Version(version("accelerate")) >= Version("1.16")

SCRIPT = Path(__file__).with_name("library_run.py")
_runs: dict[str, dict] = {}


def _run(mode: str) -> dict:
    if mode not in _runs:
        # The switch maps CUDA's API the same way on every provider; the libraries' training needs every
        # operator served, which the host runtime has: on a build with the Infini stack it runs there.
        env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_INFINI_WORKER_THREADS="1", PYTHONWARNINGS="ignore",
                   TORCH_INFINI_PROVIDER="host")
        for name in ("TORCH_INFINI_TRANSFER_CUDA", "ACCELERATE_TORCH_DEVICE", "TORCH_INFINI_HOST_DEVICES"):
            env.pop(name, None)
        if mode == "switch":
            env["TORCH_INFINI_TRANSFER_CUDA"] = "1"
        elif mode == "env":
            env["ACCELERATE_TORCH_DEVICE"] = "infini"
        proc = subprocess.run([sys.executable, str(SCRIPT), mode], env=env, capture_output=True, text=True,
                              timeout=HANG_GUARD_S)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
        assert proc.returncode == 0 and lines, (proc.stdout + proc.stderr)[-4000:]
        _runs[mode] = json.loads(lines[-1][len("RESULT"):])
    return _runs[mode]


@pytest.mark.parametrize("mode", ["switch", "env"])
def test_accelerator_trains_on_infini(mode):
    got, want = _run(mode)["accelerate"], _run("cpu")["accelerate"]
    # With the switch, accelerate before 1.16 picks "cuda" (torch.cuda answers); everything it places lands on infini.
    assert got["device"] == ("cuda" if mode == "switch" and not ACCELERATE_FINDS_INFINI else "infini"), got["device"]
    assert want["device"] == "cpu"
    assert got["parameters_on"] == "infini"
    assert got["batches_on"] == ["first layer:torch.bfloat16", "infini"], got["batches_on"]
    assert want["batches_on"] == ["cpu", "first layer:torch.bfloat16"]
    torch.testing.assert_close(torch.tensor(got["losses"]), torch.tensor(want["losses"]))
    # fp16: with the switch accelerate sees "cuda" and scales on infini; without it, accelerate's own
    # device list refuses infini before 1.16 (docs/transfer-cuda.md says so).
    if mode == "switch" or ACCELERATE_FINDS_INFINI:
        assert got["fp16"] == "scaler on infini", got["fp16"]
    else:
        assert got["fp16"].startswith("refused: fp16 mixed precision requires a device in"), got["fp16"]


@pytest.mark.parametrize("mode", ["switch", "env"])
def test_trainer_trains_ten_steps_on_infini(mode):
    got, want = _run(mode)["trainer"], _run("cpu")["trainer"]
    assert got["steps"] == want["steps"] == 10
    assert got["placed"] == ["infini/infini"], got["placed"]
    assert want["placed"] == ["cpu/cpu"]
    assert len(got["losses"]) == 10
    torch.testing.assert_close(torch.tensor(got["losses"]), torch.tensor(want["losses"]))
