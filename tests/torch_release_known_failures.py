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

Keys are pytest node ids relative to the repository, without the parameters
to cover every parametrization of a test.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReleaseFailure:
    """Fails on PyTorch ``first`` to ``last`` (major.minor, both included)."""

    first: str
    last: str
    reason: str
    run: bool = True


KNOWN_FAILURES: dict[str, ReleaseFailure] = {}
