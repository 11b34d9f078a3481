"""api_profile.json against the contracts, torch.cuda and torch.infini.

The profile classifies every public torch.cuda symbol as ``required``
(implemented by torch.infini, gated by contract tests), ``planned`` or
``excluded`` (each with a reason). Contract tests declare what they gate with
``@pytest.mark.covers(...)``; the two must agree both ways.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest
import torch

import torch_infini  # noqa: F401

HERE = Path(__file__).resolve().parent
PROFILE_PATH = HERE / "api_profile.json"
TOOL_PATH = HERE.parent.parent / "tools" / "report_api_gaps.py"


def _load_tool():
    spec = importlib.util.spec_from_file_location("_report_api_gaps", TOOL_PATH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


tool = _load_tool()


@pytest.fixture(scope="module")
def profile() -> dict:
    return json.loads(PROFILE_PATH.read_text(encoding="utf-8"))


def _contract_tests() -> dict[str, tuple[str, ...]]:
    """{"file.py::test_name": symbols it declares} for every contract test."""
    found: dict[str, tuple[str, ...]] = {}
    for path in sorted(HERE.glob("test_contract_*.py")):
        spec = importlib.util.spec_from_file_location(f"_contracts_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for name, fn in vars(module).items():
            if not name.startswith("test_") or not callable(fn):
                continue
            symbols: tuple[str, ...] = ()
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "covers":
                    symbols += tuple(mark.args)
            found[f"{path.name}::{name}"] = symbols
    return found


CONTRACTS = _contract_tests()


def _by_status(profile: dict, status: str) -> dict[str, dict]:
    return {n: e for n, e in profile["symbols"].items() if e["status"] == status}


def test_profile_schema_is_valid(profile):
    assert tool.validate_profile(profile) == []
    assert profile["schema_version"] == 1
    assert profile["reference"] == "torch.cuda"
    assert profile["target"] == "torch.infini"
    for status in ("required", "planned", "excluded"):
        assert _by_status(profile, status), f"no {status} symbol at all"


def test_no_required_symbol_without_contracts(profile):
    bare = [n for n, e in _by_status(profile, "required").items() if not e.get("contracts")]
    assert bare == []


def test_every_referenced_contract_exists(profile):
    assert CONTRACTS, "no contract tests found"
    missing = {
        name: [c for c in entry.get("contracts", []) if c not in CONTRACTS]
        for name, entry in profile["symbols"].items()
    }
    assert {n: m for n, m in missing.items() if m} == {}


def test_every_contract_declares_profiled_required_symbols(profile):
    required = _by_status(profile, "required")
    problems = []
    for test_id, symbols in CONTRACTS.items():
        if not symbols:
            problems.append(f"{test_id}: no @pytest.mark.covers(...) declaration")
        for symbol in symbols:
            entry = profile["symbols"].get(symbol)
            if entry is None:
                problems.append(f"{test_id}: covers '{symbol}', which the profile does not list")
            elif symbol not in required:
                problems.append(f"{test_id}: covers '{symbol}', which the profile marks {entry['status']}")
            elif test_id not in entry["contracts"]:
                problems.append(f"{test_id}: covers '{symbol}' but is not among its contracts")
    assert problems == []


def test_profile_contracts_match_the_declarations(profile):
    problems = []
    for name, entry in _by_status(profile, "required").items():
        for test_id in entry["contracts"]:
            if test_id in CONTRACTS and name not in CONTRACTS[test_id]:
                problems.append(f"'{name}' lists {test_id}, which does not declare covers('{name}')")
    assert problems == []


def test_required_symbols_are_exported_by_torch_infini(profile):
    for name in _by_status(profile, "required"):
        assert name in torch.infini.__all__, name
        assert hasattr(torch.infini, name), name
        assert hasattr(torch.cuda, name), f"{name} is not a torch.cuda symbol"


def test_planned_and_excluded_have_reasons(profile):
    for status in ("planned", "excluded"):
        for name, entry in _by_status(profile, status).items():
            assert entry.get("reason", "").strip(), f"{status} '{name}' without a reason"


def test_every_public_torch_cuda_symbol_is_classified(profile):
    unclassified = [n for n in tool.public_symbols(torch.cuda) if n not in profile["symbols"]]
    assert unclassified == [], (
        f"torch {torch.__version__} has torch.cuda symbols the profile does not classify; "
        "add them to tests/conformance/api_profile.json (tools/report_api_gaps.py lists them)"
    )


def test_torch_infini_exports_nothing_unprofiled(profile):
    """Every torch.cuda-named export of torch.infini is required (so gated by a contract)."""
    exported = [n for n in torch.infini.__all__ if hasattr(torch.cuda, n)]
    not_required = [n for n in exported if profile["symbols"].get(n, {}).get("status") != "required"]
    assert not_required == []
