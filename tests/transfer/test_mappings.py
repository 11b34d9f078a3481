"""Each mapping of the CUDA-to-infini switch (torch_infini.transfer_to_infini),
checked in one fresh interpreter with ``TORCH_INFINI_TRANSFER_CUDA=1`` (the
switch changes PyTorch for the whole process, so never in this one). The
scenarios and their oracles are in switch_scenarios.py."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hang_guard import HANG_GUARD_S

SCRIPT = Path(__file__).with_name("switch_scenarios.py")


def _scenario_names() -> list[str]:
    spec = importlib.util.spec_from_file_location("switch_scenarios", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.SCENARIOS)


_results: dict = {}


def _run_all() -> dict:
    if not _results:
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "results.json")
            # The switch maps CUDA's API the same way on every provider; the scenarios need every operator
            # served and graph capture, which the host runtime has: on a build with the Infini stack they run there.
            env = dict(os.environ, TORCH_INFINI_TRANSFER_CUDA="1", PYTHONWARNINGS="ignore",
                       TORCH_INFINI_PROVIDER="host")
            proc = subprocess.run([sys.executable, str(SCRIPT), out], env=env, capture_output=True, text=True,
                                  timeout=HANG_GUARD_S)
            if proc.returncode != 0 or not os.path.exists(out):
                _results["__error__"] = f"exit status {proc.returncode}:\n{(proc.stdout + proc.stderr)[-4000:]}"
            else:
                _results.update(json.loads(Path(out).read_text()))
    return _results


@pytest.mark.parametrize("name", _scenario_names())
def test_mapping(name):
    results = _run_all()
    if "__error__" in results:
        pytest.fail(results["__error__"], pytrace=False)
    assert name in results, f"{name} did not run"
    if results[name] is not None:
        pytest.fail(results[name], pytrace=False)
