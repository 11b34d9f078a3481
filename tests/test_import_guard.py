"""The import guard (torch_infini/_guard.py): version and ABI checks before
anything is renamed or loaded."""

from __future__ import annotations

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
from torch_infini import _guard
from hang_guard import HANG_GUARD_S

BUILT = {
    "schema": 1,
    "torch_version": "2.13.0+cpu",
    "torch_major_minor": "2.13",
    "cxx11_abi": True,
    "infini_stack": False,
}


@pytest.mark.parametrize(
    "running",
    ["2.13.0", "2.13.1", "2.13.0+cu128", "2.13.0+cpu", "2.13.0a0+git123", "2.13.0rc1", "2.13.0b1",
     "2.13.0.dev20260101", "2.13.2.post1"],
)
def test_same_major_minor_is_accepted(running):
    assert _guard.check_compatible(BUILT, running, True) is None


@pytest.mark.parametrize("running", ["2.12.0", "2.12.1+cu121", "2.14.0", "2.14.0.dev20260101", "3.13.0", "2.1.0",
                                     "2.130.0"])
def test_other_major_minor_is_rejected(running):
    with pytest.raises(ImportError) as info:
        _guard.check_compatible(BUILT, running, True)
    message = str(info.value)
    assert "2.13.0+cpu" in message            # what it was built for
    assert running in message                 # what is running
    assert "Rebuild or reinstall" in message


@pytest.mark.parametrize("running", ["2.10.0", "2.10.1+cu128", "2.16.0", "2.16.0.dev20270101", "3.0.0", "1.13.1"])
def test_unsupported_release_is_rejected_naming_the_supported_ones(running):
    with pytest.raises(ImportError) as info:
        _guard.check_compatible(BUILT, running, True)
    message = str(info.value)
    assert f"supports PyTorch {_guard.SUPPORTED_TORCH[0]} to {_guard.SUPPORTED_TORCH[1]}" in message
    assert running in message and "2.13.0+cpu" in message
    assert "Rebuild or reinstall" in message


@pytest.mark.parametrize("built", ["2.11.0+cu130", "2.12.0", "2.14.1", "2.15.0"])
def test_other_supported_release_is_rejected_naming_the_build(built):
    """A build for one supported release refuses another: the C++ extension
    is compiled against one release's headers and libraries."""
    with pytest.raises(ImportError) as info:
        _guard.check_compatible(dict(BUILT, torch_version=built, torch_major_minor=_guard.major_minor(built)),
                                "2.13.0", True)
    message = str(info.value)
    assert f"built for PyTorch {built}" in message and "2.13.0" in message
    assert _guard.supported_releases() in message


@pytest.mark.parametrize("version,supported",
                         [("2.11.0", True), ("2.11.0+cu130", True), ("2.13.0+cpu", True), ("2.14.1", True),
                          ("2.15.2", True), ("2.15.0rc1", True), ("2.10.9", False), ("2.16.0", False),
                          ("3.11.0", False), ("1.15.0", False)])
def test_is_supported(version, supported):
    assert _guard.is_supported(version) is supported


def test_supported_releases_agree_with_pyproject():
    """pyproject.toml's torch requirement (build and run) names the same releases as the guard."""
    text = (Path(__file__).resolve().parents[1] / "pyproject.toml").read_text()
    oldest, newest = _guard.SUPPORTED_TORCH
    major, minor = (int(part) for part in newest.split("."))
    assert text.count(f'"torch>={oldest},<{major}.{minor + 1}"') == 2, text


def test_running_torch_is_supported():
    assert _guard.is_supported(torch.__version__)


def test_build_with_other_version_is_rejected_by_running_version():
    built = dict(BUILT, torch_version="2.12.1", torch_major_minor="2.12")
    with pytest.raises(ImportError, match=r"2\.12\.1.*2\.13\.0") as info:
        _guard.check_compatible(built, "2.13.0", True)
    assert "Rebuild or reinstall" in str(info.value)


@pytest.mark.parametrize("built_abi,running_abi", [(True, False), (False, True)])
def test_abi_mismatch_is_rejected(built_abi, running_abi):
    with pytest.raises(ImportError, match="ABI") as info:
        _guard.check_compatible(dict(BUILT, cxx11_abi=built_abi), "2.13.0", running_abi)
    message = str(info.value)
    assert f"_GLIBCXX_USE_CXX11_ABI={int(built_abi)}" in message
    assert f"_GLIBCXX_USE_CXX11_ABI={int(running_abi)}" in message
    assert "Rebuild or reinstall" in message


def test_same_abi_false_is_accepted():
    assert _guard.check_compatible(dict(BUILT, cxx11_abi=False), "2.13.0", False) is None


@pytest.mark.parametrize("bad", [{"torch_major_minor": "two"}, {"torch_major_minor": None}, {"cxx11_abi": "yes"}])
def test_malformed_metadata_values_are_import_errors(bad):
    with pytest.raises(ImportError, match="malformed"):
        _guard.check_compatible(dict(BUILT, **bad), "2.13.0", True)


def test_unparseable_running_version_is_import_error():
    with pytest.raises(ImportError, match="garbage"):
        _guard.check_compatible(BUILT, "garbage", True)


@pytest.mark.parametrize(
    "version,expected",
    [("2.13.0+cpu", "2.13"), ("2.13.1", "2.13"), ("2.13.0a0+git1", "2.13"), ("2.13.0rc2", "2.13"), ("10.0", "10.0"),
     (" 2.13.0", "2.13"), ("02.013.0", "2.13")],
)
def test_major_minor(version, expected):
    assert _guard.major_minor(version) == expected


@pytest.mark.parametrize("bad", ["", "2", "v2.13", "abc"])
def test_major_minor_rejects_non_versions(bad):
    with pytest.raises(ValueError):
        _guard.major_minor(bad)


def test_load_metadata_ok(tmp_path):
    path = tmp_path / "_build_info.json"
    path.write_text(json.dumps(BUILT))
    assert _guard.load_metadata(path) == BUILT


def test_load_metadata_missing_file(tmp_path):
    path = tmp_path / "missing.json"
    with pytest.raises(ImportError, match="missing") as info:
        _guard.load_metadata(path)
    assert str(path) in str(info.value)
    assert "Rebuild or reinstall" in str(info.value)


@pytest.mark.parametrize("text", ["{not json", "", "\x00\x01"])
def test_load_metadata_bad_json(tmp_path, text):
    path = tmp_path / "_build_info.json"
    path.write_text(text)
    with pytest.raises(ImportError, match="unreadable") as info:
        _guard.load_metadata(path)
    assert str(path) in str(info.value)


@pytest.mark.parametrize("missing", list(_guard.REQUIRED_KEYS))
def test_load_metadata_missing_key(tmp_path, missing):
    path = tmp_path / "_build_info.json"
    path.write_text(json.dumps({k: v for k, v in BUILT.items() if k != missing}))
    with pytest.raises(ImportError, match="malformed") as info:
        _guard.load_metadata(path)
    assert missing in str(info.value)


@pytest.mark.parametrize("payload", [[1, 2], "text", 3, None])
def test_load_metadata_not_an_object(tmp_path, payload):
    path = tmp_path / "_build_info.json"
    path.write_text(json.dumps(payload))
    with pytest.raises(ImportError, match="malformed"):
        _guard.load_metadata(path)


def test_installed_metadata_matches_running_torch():
    meta = _guard.load_metadata()
    assert _guard.major_minor(meta["torch_version"]) == _guard.major_minor(torch.__version__)
    assert meta["cxx11_abi"] == torch._C._GLIBCXX_USE_CXX11_ABI
    assert _guard.check_build() == meta
    assert torch_infini.build_info() == meta
    # build_info returns a copy.
    torch_infini.build_info()["torch_version"] = "changed"
    assert torch_infini.build_info()["torch_version"] == meta["torch_version"]


def test_mismatched_build_fails_import_and_leaves_privateuse1_unrenamed(tmp_path):
    package = Path(torch_infini.__file__).parent
    copy = tmp_path / "site" / "torch_infini"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    meta = json.loads((copy / "_build_info.json").read_text())
    # Another supported release than the running one.
    other = "2.12" if _guard.major_minor(torch.__version__) != "2.12" else "2.13"
    meta.update(torch_version=f"{other}.0+cpu", torch_major_minor=other)
    (copy / "_build_info.json").write_text(json.dumps(meta))

    code = textwrap.dedent(
        """
        import importlib.util, json, sys
        import torch
        spec = importlib.util.find_spec("torch_infini")
        result = {"origin": spec.origin}
        try:
            import torch_infini
            result["error"] = None
        except ImportError as e:
            result["error"] = str(e)
        result["backend"] = torch._C._get_privateuse1_backend_name()
        result["has_torch_infini"] = hasattr(torch, "infini")
        result["native_loaded"] = "torch_infini._C" in sys.modules
        print("RESULT" + json.dumps(result))
        """
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    # cwd outside the repository, so that the copy (on PYTHONPATH) is found first.
    proc = subprocess.run([sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    result = json.loads(line[-1][len("RESULT"):])
    assert Path(result["origin"]).resolve() == (copy / "__init__.py").resolve()
    assert result["error"] is not None
    assert f"built for PyTorch {other}.0+cpu" in result["error"]
    assert torch.__version__ in result["error"]
    assert _guard.supported_releases() in result["error"]
    assert "Rebuild or reinstall" in result["error"]
    assert result["backend"] == "privateuseone"
    assert result["has_torch_infini"] is False
    assert result["native_loaded"] is False
