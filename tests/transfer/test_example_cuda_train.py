"""examples/cuda_train.py, a training script written for CUDA, runs unchanged
on infini with the switch on, on one process and on two under torchrun; its
losses and final parameters equal those of the same script on the CPU (gloo)
with the same seed.

Kernels run single-threaded on both sides (OMP_NUM_THREADS=1,
TORCH_INFINI_WORKER_THREADS=1), so that the host runtime's ATen kernels and
CPU PyTorch's reduce in the same order and the comparison can be exact.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import torch

import torch_infini
from hang_guard import HANG_GUARD_S

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cuda_train.py"
# The CPU oracle under torchrun runs through this, for PyTorch's own exit race (see its docstring).
EXIT_GRACE = Path(__file__).resolve().parent / "exit_grace.py"


def _train(device: str, *options: str, processes: int = 1, switch: bool = True) -> dict:
    # The switch maps CUDA's API the same way on every provider; the example needs every operator served,
    # which the host runtime has: on a build with the Infini stack it runs there.
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_INFINI_WORKER_THREADS="1", PYTHONWARNINGS="ignore",
               GLOO_SOCKET_IFNAME="lo", TORCH_INFINI_HOST_DEVICES=str(processes), TORCH_INFINI_PROVIDER="host")
    env.pop("TORCH_INFINI_TRANSFER_CUDA", None)
    if switch:
        env["TORCH_INFINI_TRANSFER_CUDA"] = "1"
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.pt")
        command = [sys.executable, str(EXAMPLE), "--device", device, "--out", out, *options]
        if processes > 1:
            if not switch:
                command.insert(1, str(EXIT_GRACE))
            command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                       f"--nproc-per-node={processes}", *command[1:]]
        proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
        assert "cuda_train OK" in proc.stdout, proc.stdout[-2000:]
        result = torch.load(out)
    result["stdout"] = proc.stdout
    return result


def _assert_same_training(got: dict, want: dict, exact: bool = True) -> None:
    assert got["world_size"] == want["world_size"]
    assert got["activation_dtype"] == want["activation_dtype"], "autocast took effect on both sides"
    if exact:
        assert got["losses"] == want["losses"], (got["losses"], want["losses"])
    else:
        torch.testing.assert_close(torch.tensor(got["losses"]), torch.tensor(want["losses"]))
    assert got["parameters"].keys() == want["parameters"].keys()
    for name, value in want["parameters"].items():
        if exact:
            assert torch.equal(got["parameters"][name], value), name
        else:
            torch.testing.assert_close(got["parameters"][name], value, msg=name)


def test_one_process_bfloat16_equals_cpu():
    """bfloat16 autocast through torch.amp.autocast("cuda"): the activations are
    bfloat16 on infini (not a silent float32 run) and equal the CPU's."""
    got = _train("cuda", "--dtype", "bfloat16")
    want = _train("cpu", "--dtype", "bfloat16", switch=False)
    assert got["parameter_device"] == "infini" and want["parameter_device"] == "cpu"
    assert "activations torch.bfloat16 on infini" in got["stdout"]
    _assert_same_training(got, want)


def test_two_processes_under_torchrun_equal_cpu_gloo():
    if torch_infini.diagnostics()["provider"] != "host":
        pytest.skip("one device per process needs the host runtime's TORCH_INFINI_HOST_DEVICES")
    got = _train("cuda", processes=2)
    want = _train("cpu", processes=2, switch=False)
    assert "device cuda:0" in got["stdout"] and got["parameter_device"] == "infini"
    _assert_same_training(got, want)
