"""Conformance suite: backend-neutral contracts for device, stream, event and
memory behaviour, written once and run on every available accelerator backend.

* ``infini`` always runs (through whichever provider ``torch_infini`` selected);
* ``cuda`` runs when ``torch.cuda.is_available()``, else it is skipped.

A contract reaches the backend only through ``mod`` (``torch.infini`` or
``torch.cuda``), ``dev`` (``torch.device(backend, 0)``) and ``hold`` (queue a
timed wait on a stream). Contracts compare state transitions and observable
behaviour, never hardware values.

Every contract test declares the ``torch.cuda`` symbols it covers with
``@pytest.mark.covers("name", ...)``; ``test_api_profile.py`` checks those
declarations against ``api_profile.json``.
"""

from __future__ import annotations

from typing import Callable

import pytest
import torch

import torch_infini

BACKENDS = ("infini", "cuda")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "covers(*symbols): the torch.cuda symbols (names in torch.cuda) a conformance contract gates",
    )


def _backend_available(name: str) -> bool:
    if name == "cuda":
        return torch.cuda.is_available()
    return getattr(torch, name).is_available()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    name = request.param
    if not _backend_available(name):
        pytest.skip(f"{name}: no device available")
    return name


@pytest.fixture
def mod(backend: str):
    """The device module under test: torch.infini or torch.cuda."""
    return getattr(torch, backend)


@pytest.fixture
def dev(backend: str) -> torch.device:
    return torch.device(backend, 0)


def _hold_infini(stream: torch.Stream, ms: float) -> bool:
    return bool(torch_infini._C._test_enqueue_delay(stream.stream_id, stream.device_index, float(ms)))


def _hold_cuda(stream: torch.Stream, ms: float) -> bool:
    # About 2 GHz: enough cycles that the stream stays busy for at least ~ms.
    with torch.cuda.stream(stream):
        torch.cuda._sleep(int(ms * 2_000_000))
    return True


@pytest.fixture
def hold(backend: str) -> Callable[[torch.Stream, float], None]:
    """``hold(stream, ms)`` keeps ``stream`` busy for about ``ms`` (work
    queued after it waits). Skips the test where the provider cannot do it
    (a synchronous backend has no pending work to observe)."""

    impl = _hold_infini if backend == "infini" else _hold_cuda

    def _hold(stream: torch.Stream, ms: float) -> None:
        if not impl(stream, ms):
            pytest.skip(f"{backend}: the provider cannot queue a timed wait on a stream")

    return _hold


@pytest.fixture(autouse=True)
def _restore_stream_and_device(request: pytest.FixtureRequest):
    """Contracts must leave the current device and stream as they found them."""
    if "backend" not in request.fixturenames:
        yield
        return
    m = getattr(torch, request.getfixturevalue("backend"))
    device_before = m.current_device()
    stream_before = m.current_stream()
    yield
    m.synchronize()
    m.set_stream(stream_before)
    m.set_device(device_before)
