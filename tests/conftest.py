"""Shared test setup: every test runs with torch_infini imported."""

from __future__ import annotations

import faulthandler
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _test_the_installed_package() -> None:
    """After a regular (not editable) install, the checkout's torch_infini/
    has no built extension: take the checkout off sys.path, here and in the
    interpreters the tests start, so that the installed package is tested."""
    if (ROOT / "torch_infini" / "_build_info.json").exists():
        return  # an editable install or an in-place build: test the checkout
    sys.path[:] = [p for p in sys.path if Path(p or os.getcwd()).resolve() != ROOT]
    os.environ["PYTHONSAFEPATH"] = "1"  # python -c / -m: no cwd on sys.path (Python 3.11+)


_test_the_installed_package()

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_infini  # noqa: E402,F401  (registers the infini device; `import torch` autoloads it too)
from hang_guard import HANG_GUARD_S  # noqa: E402


def pytest_report_header(config) -> str:
    return f"torch_infini under test: {Path(torch_infini.__file__).parent}"


def pytest_terminal_summary(terminalreporter) -> None:
    """Under TORCH_INFINI_VERIFY_CACHES=1: how many cache hits were recomputed
    and compared (tests/test_cache_verification.py reads this line)."""
    counts = torch_infini._C._cache_verification()
    if counts["enabled"]:
        terminalreporter.write_line(
            f"cache verification: {counts['verified']} hits verified, {counts['differences']} differences")


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
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


@pytest.fixture
def rng_states_kept():
    """Restores the CPU and infini generators' states after the test."""
    cpu = torch.get_rng_state()
    states = torch.infini.get_rng_state_all()
    yield
    torch.set_rng_state(cpu)
    torch.infini.set_rng_state_all(states)


@pytest.fixture
def native_only():
    """The opt-in CPU fallback off for the test (restored after it)."""
    was = torch_infini.fallback.is_enabled()
    torch_infini.fallback.disable()
    yield
    if was:
        torch_infini.fallback.enable()


#: A test (setup, call and teardown) still running after this long is hung:
#: every thread's Python stack is written to stderr and the process exits,
#: so that a hang ends the run naming where it hung rather than running into
#: CI's time limit. Above HANG_GUARD_S, so the tests' own bounded waits fail
#: first with their messages.
TEST_WATCHDOG_S = HANG_GUARD_S + 300


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    faulthandler.dump_traceback_later(TEST_WATCHDOG_S, exit=True, file=sys.__stderr__)
    try:
        return (yield)
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def _synchronize_after_test():
    yield
    torch.infini.synchronize()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """On the Infini stack, a test that reaches an operator InfiniOps has no
    kernel for (the provider refuses it with NotImplementedError naming the
    operator) is skipped with that message: what it checks needs the kernel.
    On the host runtime every operator runs, and nothing is skipped this way."""
    try:
        return (yield)
    except NotImplementedError as e:
        message = str(e)
        refused = "InfiniOps" in message and "TORCH_INFINI_PROVIDER=host" in message
        if refused and torch_infini.diagnostics()["provider"] != "host":
            pytest.skip(f"unserved on this InfiniOps build: {message.splitlines()[0]}")
        raise



def pytest_collection_modifyitems(config, items) -> None:
    """Marks the tests tests/torch_release_known_failures.py lists for the
    running PyTorch release as strict expected failures, with their reason."""
    from torch_release_known_failures import known_failure

    for item in items:
        entry = known_failure(item.nodeid)
        if entry is not None:
            item.add_marker(pytest.mark.xfail(
                reason=f"PyTorch {torch.__version__}: {entry.reason} (tests/torch_release_known_failures.py)",
                strict=True, run=entry.run))
