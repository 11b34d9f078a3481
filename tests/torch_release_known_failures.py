"""The one reviewed list of tests that fail on some of the supported PyTorch
releases (2.11 to 2.15, ``torch_infini._guard.SUPPORTED_TORCH``) because that
release lacks, or behaves otherwise in, what the test checks; each with the
releases it fails on and the reason.

``conftest.py`` marks a listed test expected to fail on those releases,
strictly: a listed test that passes there fails the run, so the list cannot
go stale. On every other release it runs as usual. An entry with
``run=False`` would take the test process down on those releases (a signal
in PyTorch's own code), so there it is reported as an expected failure
without being run. The OpInfo, module and optimizer databases keep their own
lists (``tests/ops/opinfo_known_failures.py``, ...); their entries for a
release live there, keyed the same way.

Keys are pytest node ids relative to the repository, without the
parameters; an entry covers every parametrization of its test, or those whose
id has one of its ``cases`` among its dash-separated parts.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from torch_infini._guard import major_minor


def release(version: str) -> tuple[int, int]:
    """``"2.13.0+cpu"`` -> ``(2, 13)``, for comparing releases."""
    major, minor = major_minor(version).split(".")
    return int(major), int(minor)


def running_release() -> tuple[int, int]:
    """The running PyTorch's release."""
    return release(torch.__version__)


@dataclass(frozen=True)
class ReleaseFailure:
    """Fails on PyTorch ``first`` to ``last`` (major.minor, both included)."""

    first: str
    last: str
    reason: str
    run: bool = True
    cases: tuple[str, ...] = ()

    def applies(self, nodeid: str) -> bool:
        """Whether the test ``nodeid`` is one it covers, and the running
        PyTorch one of the releases it fails on."""
        if not release(self.first) <= running_release() <= release(self.last):
            return False
        parts = nodeid.partition("[")[2].rstrip("]").split("-")
        return not self.cases or any(case in parts for case in self.cases)


def known_failure(nodeid: str) -> ReleaseFailure | None:
    """The entry that expects ``nodeid`` to fail on the running PyTorch, if any."""
    entry = KNOWN_FAILURES.get(nodeid.partition("[")[0])
    return entry if entry is not None and entry.applies(nodeid) else None


KNOWN_FAILURES: dict[str, ReleaseFailure] = {
    "tests/test_compile.py::test_a_failing_compiled_kernel_reports_at_the_next_synchronize": ReleaseFailure(
        "2.11", "2.12",
        "Inductor's C++ kernels check integer division by zero (ZeroDivisionError, "
        "torch/csrc/inductor/cpp_prefix.h) from PyTorch 2.13 on; before, the compiled kernel divides by "
        "zero on the CPU too, and the process dies of SIGFPE", run=False),
    "tests/distributed/test_collectives.py::test_collective_matches_gloo_on_cpu": ReleaseFailure(
        "2.11", "2.11",
        "the oracle cannot run these on CPU: torch.distributed.all_gather_single and reduce_scatter_single "
        "came with PyTorch 2.13, and gloo's all_to_all (lists of tensors) with 2.12",
        cases=("all_gather_single", "reduce_scatter_single", "all_to_all")),
    "tests/test_graphs.py::test_accelerator_graph_uses_the_infini_graph": ReleaseFailure(
        "2.11", "2.11",
        "torch.accelerator.Graph, and the at::GraphImplInterface registry infini's graphs register with, "
        "came with PyTorch 2.12 (torch.infini.graph works the same)"),
    "tests/test_memory.py::test_accelerator_empty_host_cache_does_not_crash": ReleaseFailure(
        "2.11", "2.11", "torch.accelerator.empty_host_cache came with PyTorch 2.12"),
    "tests/test_pinned.py::test_storage_pin_memory": ReleaseFailure(
        "2.11", "2.12",
        "UntypedStorage.pin_memory() pins for device 'cuda' by default before PyTorch 2.13 (the current "
        "accelerator from 2.13 on), which fails without CUDA; pin_memory('infini') works"),
    "tests/test_profiler.py::test_device_events_lie_between_launch_and_region_end": ReleaseFailure(
        "2.11", "2.11",
        "FunctionEvent.linked_correlation_id (a device event's launching operator) came with PyTorch 2.12"),
}
