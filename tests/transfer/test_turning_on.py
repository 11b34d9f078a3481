"""The two ways to turn the switch on, and how to see that it is on: the
import (``import torch_infini.transfer_to_infini``) and the environment
variable read at ``import torch``; ``python -m torch_infini`` reports it.
A malformed value is an error naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from hang_guard import HANG_GUARD_S


def _python(args: list[str], **env_changes: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)


def test_the_import_turns_it_on():
    code = textwrap.dedent("""
        import torch, torch_infini._transfer as transfer
        before = transfer.is_enabled(), torch.cuda.is_available()
        import torch_infini.transfer_to_infini as switch
        print(before, switch.is_enabled(), torch.cuda.is_available(), torch.zeros(1, device="cuda").device)
    """)
    proc = _python(["-c", code], TORCH_INFINI_TRANSFER_CUDA=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["(False,", "False)", "True", "True", "infini:0"], proc.stdout


def test_the_variable_turns_it_on_at_import_torch():
    code = "import torch; print(torch.cuda.is_available(), torch.ones(1).cuda().device)"
    proc = _python(["-c", code], TORCH_INFINI_TRANSFER_CUDA="1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["True", "infini:0"], proc.stdout


def test_python_m_torch_infini_reports_it():
    on = _python(["-m", "torch_infini"], TORCH_INFINI_TRANSFER_CUDA="1")
    off = _python(["-m", "torch_infini"], TORCH_INFINI_TRANSFER_CUDA=None)
    assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
    assert "CUDA-to-infini switch: on" in on.stdout
    assert "CUDA-to-infini switch: off (TORCH_INFINI_TRANSFER_CUDA=1 or import torch_infini.transfer_to_infini)" \
        in off.stdout


def test_a_malformed_value_names_the_variable():
    proc = _python(["-c", "import torch_infini"], TORCH_INFINI_TRANSFER_CUDA="yes")
    assert proc.returncode != 0
    assert "TORCH_INFINI_TRANSFER_CUDA='yes' is invalid: expected 1 (on) or 0 (off)" in proc.stderr


def test_a_failure_while_turning_it_on_leaves_pytorch_as_it_was():
    code = textwrap.dedent("""
        import torch, torch_infini._transfer as transfer
        from torch_infini._transfer import _distributed
        zeros, to, available, generator = torch.zeros, torch.Tensor.to, torch.cuda.is_available, torch.Generator
        had_generators = "default_generators" in vars(torch.cuda)

        def broken():
            raise RuntimeError("injected")

        _distributed.install = broken
        try:
            transfer.enable()
        except RuntimeError as error:
            print("raised", error)
        print(transfer.is_enabled(), transfer.changes() == [], torch.zeros is zeros, torch.Tensor.to is to,
              torch.cuda.is_available is available, torch.Generator is generator,
              ("default_generators" in vars(torch.cuda)) == had_generators, "__new__" in vars(torch.UntypedStorage))
    """)
    proc = _python(["-c", code], TORCH_INFINI_TRANSFER_CUDA=None)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["raised", "injected", "False", "True", "True", "True", "True", "True", "True",
                                   "False"], proc.stdout
