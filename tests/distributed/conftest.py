"""Distributed test runs, launched once per configuration and shared by the
test files: every scenario of worker.py runs in one run of N ranks on
localhost, in a direct and a staged group, and each test checks that every
rank reported its scenario passed.

Two runs: 2 ranks in a ``"cpu:gloo,infini:infini"`` group, and 3 ranks in an
``"infini"`` group (its CPU tensors go through the infini backend to gloo).
"""

from __future__ import annotations

import pytest

import torch

from .launch import launch
from hang_guard import HANG_GUARD_S

#: world size -> backend string of its run.
RUNS = {2: "cpu:gloo,infini:infini", 3: "infini"}
RUN_TIMEOUT_S = HANG_GUARD_S

_results: dict[int, dict] = {}


def run_results(world_size: int) -> dict:
    if world_size not in _results:
        _results[world_size] = launch(world_size, RUNS[world_size], timeout=RUN_TIMEOUT_S)
    return _results[world_size]


def assert_scenario_passed(world_size: int, mode: str, name: str) -> None:
    run = run_results(world_size)
    if run["error"]:
        pytest.fail(f"the {world_size}-rank run failed:\n{run['error']}", pytrace=False)
    key = f"{name}@{mode}"
    failures = []
    for rank, results in enumerate(run["ranks"]):
        assert key in results, f"rank {rank} did not run {key!r}"
        if results[key] is not None:
            failures.append(f"rank {rank}:\n{results[key]}")
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)


@pytest.fixture(params=sorted(RUNS), ids=lambda n: f"{n}ranks")
def world_size(request) -> int:
    if not torch.distributed.is_available():
        pytest.fail("this PyTorch has no torch.distributed")
    return request.param


@pytest.fixture(params=["direct", "staged"])
def mode(request) -> str:
    """direct: gloo in place on the device memory; staged: through pinned
    staging copies (what providers without host-addressable memory use)."""
    return request.param


def pytest_collection_modifyitems(config, items):
    """The runs simulate one device per rank with TORCH_INFINI_HOST_DEVICES,
    which only the host runtime has (InfiniRT's CPU backend has one device).
    The tensor-parallel run puts each rank on its process's device 0 there."""
    import torch_infini

    if torch_infini.diagnostics()["provider"] == "host":
        return
    skip = pytest.mark.skip(reason="one device per rank needs the host runtime's TORCH_INFINI_HOST_DEVICES")
    for item in items:
        if "tests/distributed/" in str(item.fspath).replace("\\", "/") and "multiprocessing" not in item.nodeid \
                and "backend_registration" not in item.nodeid and "tensor_parallel" not in item.nodeid:
            item.add_marker(skip)
