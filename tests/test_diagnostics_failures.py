"""``python -m torch_infini`` under each failure mode it exists for: it prints
every line it can (versions, build), then each problem and its fix, and exits
non-zero only when the device cannot be used. Never a traceback.

Each case is a fresh interpreter; broken installs are copies of the package
in tmp_path (found first through PYTHONPATH, run outside the repository).
"""

from __future__ import annotations

import concurrent.futures
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_infini
from hang_guard import HANG_GUARD_S

STACK_COMPILED = bool(torch_infini.build_info()["infini_stack"])
PACKAGE = Path(torch_infini.__file__).parent


def _broken_copy(root: Path, *, torch_version: str | None = None, metadata: bool = True,
                 native_source: str | None = None, infini_stack: bool | None = None) -> Path:
    """A copy of the package in root/site, broken as asked; returns root/site."""
    copy = root / "site" / "torch_infini"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    meta = json.loads((copy / "_build_info.json").read_text())
    if torch_version is not None:
        meta.update(torch_version=torch_version, torch_major_minor=".".join(torch_version.split(".")[:2]))
    if infini_stack is not None:
        meta.update(infini_stack=infini_stack, infini_rt_backends=["cpu"] if infini_stack else [])
    (copy / "_build_info.json").write_text(json.dumps(meta))
    if not metadata:
        (copy / "_build_info.json").unlink()
    if native_source is not None:
        source = root / "fake_native.c"
        source.write_text(native_source)
        target = copy / ("_C" + importlib.machinery.EXTENSION_SUFFIXES[0])
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(target), str(source)], check=True, timeout=HANG_GUARD_S)
    return root / "site"


# A native module that needs a symbol no library defines, as a libinfiniops
# built against another InfiniRT does (InfiniRT a38977e changed TensorView).
UNDEFINED_SYMBOL_SOURCE = """
extern int _ZNK6infini2rt10TensorView4ndimEv(void);
int PyInit__C(void) { return _ZNK6infini2rt10TensorView4ndimEv(); }
"""


def _cases(tmp: Path) -> dict[str, tuple[list[str], dict[str, str], Path | None]]:
    """name -> (arguments after -m torch_infini, environment changes, PYTHONPATH site or None)."""
    cases = {
        "ok": ([], {}, None),
        "ok_json": (["--json"], {}, None),
        "bogus_provider": ([], {"TORCH_INFINI_PROVIDER": "bogus"}, None),
        "bogus_provider_json": (["--json"], {"TORCH_INFINI_PROVIDER": "bogus"}, None),
        "bogus_provider_ops": (["--ops"], {"TORCH_INFINI_PROVIDER": "bogus"}, None),
        "host_devices_99": ([], {"TORCH_INFINI_PROVIDER": "host", "TORCH_INFINI_HOST_DEVICES": "99"}, None),
        "unknown_variable": ([], {"TORCH_INFINI_HOST_DEVICE": "2"}, None),
        "other_torch": ([], {}, _broken_copy(tmp / "other_torch", torch_version="2.12.0+cpu")),
        "no_metadata": ([], {}, _broken_copy(tmp / "no_metadata", metadata=False)),
    }
    if shutil.which("cc") is not None:
        cases["undefined_symbol"] = ([], {}, _broken_copy(tmp / "undefined_symbol", infini_stack=True,
                                                          native_source=UNDEFINED_SYMBOL_SOURCE))
    if not STACK_COMPILED:
        cases["infini_without_stack"] = ([], {"TORCH_INFINI_PROVIDER": "infini"}, None)
    return cases


def _run(args: list[str], changes: dict[str, str], site: Path | None, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_INFINI_")}
    env.update(changes)
    if site is not None:
        env["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "torch_infini", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=HANG_GUARD_S)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("diagnostics")
    cases = _cases(tmp)
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_run, args, env, site, tmp) for name, (args, env, site) in cases.items()}
        return {name: future.result() for name, future in futures.items()}


def _check_no_traceback(proc: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr


def _check_header(proc: subprocess.CompletedProcess, built_for: str | None = None) -> None:
    """The lines that need no runtime are always printed."""
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"torch_infini {torch_infini.__version__} (Python "), proc.stdout
    assert lines[1].startswith(f"PyTorch {torch.__version__} (CXX11 ABI "), proc.stdout
    if built_for is not None:
        assert lines[1].endswith(f"built for {built_for}"), lines[1]
    assert lines[2].startswith("Infini stack compiled in: "), proc.stdout


def _problems(proc: subprocess.CompletedProcess) -> list[tuple[str, str]]:
    lines = proc.stdout.splitlines()
    return [(line[len("Problem: "):], lines[i + 1].strip()[len("Fix: "):])
            for i, line in enumerate(lines) if line.startswith("Problem: ")]


def test_healthy_install_exits_0_without_problems(runs):
    proc = runs["ok"]
    assert proc.returncode == 0, proc.stderr
    _check_header(proc, torch_infini.build_info()["torch_version"])
    assert _problems(proc) == []
    assert proc.stdout.splitlines()[-1] == "Status: usable"
    data = json.loads(runs["ok_json"].stdout)
    assert data["usable"] is True and data["problems"] == []


@pytest.mark.parametrize("name,needle,fix_needle", [
    ("bogus_provider", "TORCH_INFINI_PROVIDER='bogus' is invalid: expected one of: auto, host, infini",
     "TORCH_INFINI_PROVIDER"),
    ("host_devices_99", "TORCH_INFINI_HOST_DEVICES='99' is invalid: expected an integer from 1 to 16",
     "TORCH_INFINI_HOST_DEVICES"),
])
def test_malformed_variable_is_a_problem_with_its_fix(runs, name, needle, fix_needle):
    proc = runs[name]
    _check_no_traceback(proc)
    assert proc.returncode == 1
    _check_header(proc)
    (problem, fix), = _problems(proc)
    assert needle in problem
    assert fix_needle in fix and "unset" in fix
    assert "Devices: 0" in proc.stdout
    assert proc.stdout.splitlines()[-1] == "Status: the infini device cannot be used"


@pytest.mark.skipif(STACK_COMPILED, reason="the Infini stack is compiled in: TORCH_INFINI_PROVIDER=infini works")
def test_infini_provider_on_a_host_only_build(runs):
    proc = runs["infini_without_stack"]
    _check_no_traceback(proc)
    assert proc.returncode == 1
    _check_header(proc)
    assert "Infini stack compiled in: no" in proc.stdout
    (problem, fix), = _problems(proc)
    assert "no Infini stack" in problem
    assert "INFINI_RT_PREFIX" in fix


def test_json_and_ops_in_failure(runs):
    proc = runs["bogus_provider_json"]
    assert proc.returncode == 1
    data = json.loads(proc.stdout)
    assert data["usable"] is False and data["torch"] == torch.__version__
    assert "TORCH_INFINI_PROVIDER='bogus'" in data["problems"][0]["problem"]
    ops = runs["bogus_provider_ops"]
    _check_no_traceback(ops)
    assert ops.returncode == 1
    assert "TORCH_INFINI_PROVIDER='bogus'" in ops.stdout


def test_unknown_variable_is_reported_but_not_fatal(runs):
    proc = runs["unknown_variable"]
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (problem, fix), = _problems(proc)
    assert "TORCH_INFINI_HOST_DEVICE is set" in problem
    assert "TORCH_INFINI_HOST_DEVICES" in fix
    assert proc.stdout.splitlines()[-1] == "Status: usable"


def test_build_for_another_pytorch(runs):
    proc = runs["other_torch"]
    _check_no_traceback(proc)
    assert proc.returncode == 1
    _check_header(proc, "2.12.0+cpu")
    (problem, fix), = _problems(proc)
    assert problem.startswith("ImportError: torch_infini was built for PyTorch 2.12.0+cpu")
    assert "pip install --no-build-isolation -e ." in fix


def test_missing_build_metadata(runs):
    proc = runs["no_metadata"]
    _check_no_traceback(proc)
    assert proc.returncode == 1
    _check_header(proc, "unknown")
    (problem, fix), = _problems(proc)
    assert "build metadata" in problem and "missing" in problem
    assert "rebuild" in fix


@pytest.mark.skipif(shutil.which("cc") is None, reason="needs a C compiler to make a native module")
def test_native_module_with_an_undefined_symbol(runs):
    """What a libinfiniops built against another InfiniRT looks like at import."""
    proc = runs["undefined_symbol"]
    _check_no_traceback(proc)
    assert proc.returncode == 1
    _check_header(proc)
    assert "Infini stack compiled in: yes" in proc.stdout
    (problem, fix), = _problems(proc)
    assert problem.startswith("ImportError: ") and "undefined symbol" in problem
    assert "rebuild InfiniOps against the InfiniRT" in fix
