"""Shared test setup: every test runs with torch_infini imported."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_infini  # noqa: F401  (registers the infini device)


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (for settings read once per process)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=full_env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def device() -> torch.device:
    return torch.device("infini:0")


@pytest.fixture(autouse=True)
def _synchronize_after_test():
    yield
    torch.infini.synchronize()
