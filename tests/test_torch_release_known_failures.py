"""The reviewed list of tests that fail on some PyTorch releases
(tests/torch_release_known_failures.py) names real tests, supported releases
and a reason each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from torch_infini import _guard
from torch_release_known_failures import KNOWN_FAILURES, ReleaseFailure, release, running_release

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("node", sorted(KNOWN_FAILURES) or ["(empty)"])
def test_entry_names_a_test_supported_releases_and_a_reason(node):
    if node == "(empty)":
        assert KNOWN_FAILURES == {}
        return
    entry = KNOWN_FAILURES[node]
    path, _, name = node.partition("::")
    assert "[" not in name, "list a test without its parameters"
    assert (ROOT / path).is_file(), node
    assert re.search(rf"^def {re.escape(name)}\(", (ROOT / path).read_text(), re.M), node
    oldest, newest = (release(v) for v in _guard.SUPPORTED_TORCH)
    assert oldest <= release(entry.first) <= release(entry.last) <= newest, node
    assert entry.reason.strip(), node


def test_an_entry_covers_its_releases_and_cases_only():
    running = "{}.{}".format(*running_release())
    entry = ReleaseFailure(running, running, "r", cases=("all_to_all",))
    assert entry.applies("tests/x.py::test_y[2ranks-direct-all_to_all]")
    assert not entry.applies("tests/x.py::test_y[2ranks-direct-all_to_all_single]")
    assert not entry.applies("tests/x.py::test_y")
    assert ReleaseFailure(running, running, "r").applies("tests/x.py::test_y[a-b]")
    assert not ReleaseFailure("1.0", "1.1", "r").applies("tests/x.py::test_y")
