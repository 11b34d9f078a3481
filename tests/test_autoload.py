"""Autoload: ``import torch`` alone gives the infini device, through the
``torch.backends`` entry point; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` turns it
off; a torch_infini that cannot load never breaks ``import torch``.

Each case is a fresh interpreter whose only import is ``import torch``.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import torch_infini
from hang_guard import HANG_GUARD_S

# Only `import torch`: whatever the script then reads, it reads through torch.
ONLY_IMPORT_TORCH = textwrap.dedent(
    """
    import json, sys, warnings
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        import torch
    r = {"backend": torch._C._get_privateuse1_backend_name(),
         "has_module": hasattr(torch, "infini"),
         "loaded": "torch_infini" in sys.modules,
         "warnings": [str(w.message) for w in caught if "torch_infini" in str(w.message)]}
    if r["has_module"]:
        x = torch.arange(6.0).reshape(2, 3).to("infini")
        r["result"] = (x * 2 + 1).cpu().sum(dim=0).tolist()
        r["device_count"] = torch.infini.device_count()
        r["tensor_method"] = torch.ones(2).infini().device.type
    print("RESULT" + json.dumps(r))
    """
)


def _run(env_changes: dict[str, str | None], cwd: Path | None = None) -> dict:
    env = dict(os.environ)
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    proc = subprocess.run([sys.executable, "-c", ONLY_IMPORT_TORCH], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][len("RESULT"):])


def test_the_entry_point_is_declared():
    points = {p.name: p.value for p in importlib.metadata.entry_points(group="torch.backends")}
    assert points.get("infini") == "torch_infini_autoload:load", (
        "the torch.backends entry point is missing: re-run `pip install --no-build-isolation -e .`")


def test_import_torch_alone_gives_the_infini_device():
    r = _run({"TORCH_DEVICE_BACKEND_AUTOLOAD": None})
    assert r["backend"] == "infini"
    assert r["has_module"] and r["loaded"]
    expected = (torch.arange(6.0).reshape(2, 3) * 2 + 1).sum(dim=0).tolist()
    assert r["result"] == expected
    assert r["device_count"] == torch.infini.device_count()
    assert r["tensor_method"] == "infini"
    assert r["warnings"] == []


def test_autoload_off_leaves_privateuse1_alone():
    r = _run({"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert r == {"backend": "privateuseone", "has_module": False, "loaded": False, "warnings": []}


def test_a_broken_torch_infini_does_not_break_import_torch(tmp_path):
    """A torch_infini built for another PyTorch: `import torch` still works,
    warns naming torch_infini and the way out, and leaves PrivateUse1 alone."""
    copy = tmp_path / "site" / "torch_infini"
    shutil.copytree(Path(torch_infini.__file__).parent, copy,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    meta = json.loads((copy / "_build_info.json").read_text())
    meta.update(torch_version="2.12.0+cpu", torch_major_minor="2.12")
    (copy / "_build_info.json").write_text(json.dumps(meta))
    # cwd outside the repository, so that the copy (on PYTHONPATH) is found first.
    r = _run({"TORCH_DEVICE_BACKEND_AUTOLOAD": None, "PYTHONPATH": str(tmp_path / "site")}, cwd=tmp_path)
    assert r["backend"] == "privateuseone"
    assert r["has_module"] is False and r["loaded"] is False
    assert len(r["warnings"]) == 1, r
    message = r["warnings"][0]
    assert "2.12" in message and "python -m torch_infini" in message
    assert "TORCH_DEVICE_BACKEND_AUTOLOAD=0" in message


@pytest.mark.parametrize("first", ["torch", "torch_infini"])
def test_explicit_import_still_works_in_either_order(first):
    """`import torch_infini` before or after torch: one registration, no warning."""
    code = textwrap.dedent(
        f"""
        import warnings
        warnings.simplefilter("error")
        import {first}
        import torch, torch_infini
        assert torch._C._get_privateuse1_backend_name() == "infini"
        print("RESULT", (torch.ones(3, device="infini") + 1).cpu().tolist())
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULT [2.0, 2.0, 2.0]" in proc.stdout
