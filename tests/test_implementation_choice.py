"""Which InfiniOps implementation kind serves a call: the measured data
(torch_infini/data/implementation_speed.json, torch_infini/_implementations.py)
and, on the Infini stack, what the choice makes of it. The pure choice is
tested against a stub install in tests/test_infiniops_binding.py."""

from __future__ import annotations

import copy

import pytest
import torch

import torch_infini
from torch_infini import _implementations
from infini_testing import DEV

INFO = torch_infini._C._provider_info()
STACK_CPU = INFO["provider"] == "infini" and INFO["backend"] == "cpu"
# Both kinds of Mul: InfiniOps built WITH_TORCH=ON (a WITH_TORCH=OFF build
# has only the native one, which then serves every call).
BOTH_KINDS = STACK_CPU and "cpu" in torch_infini.build_info()["infini_ops_aten_backed"]


def test_the_shipped_data_is_what_the_extension_holds():
    rows = _implementations.rows(_implementations.load())
    assert ("cpu", "*", -1, "aten") in rows  # the CPU backend's default
    assert sorted(_implementations.current()) == sorted(rows)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(format=99), "format"),
    (lambda d: d["backends"]["cpu"].update(default="fast"), "default"),
    (lambda d: d["backends"]["cpu"]["operators"].update(Mul=[{"below": None, "faster": "gpu"}]), "faster"),
    (lambda d: d["backends"]["cpu"]["operators"].update(Mul=[{"below": 1024, "faster": "aten"}]), "end with"),
    (lambda d: d["backends"]["cpu"]["operators"].update(
        Mul=[{"below": 1024, "faster": "aten"}, {"below": 16, "faster": "native"}, {"below": None, "faster": "aten"}]),
     "increasing"),
])
def test_malformed_data_is_refused(change, message):
    data = copy.deepcopy(_implementations.load())
    change(data)
    with pytest.raises(ValueError, match=message):
        _implementations.rows(data)


def _served_as(fn) -> dict[str, str]:
    """The kind each operator ``fn`` calls was served as (coverage records)."""
    C = torch_infini._C
    C._coverage_reset()
    C._coverage_start_recording()
    try:
        fn()
    finally:
        C._coverage_stop_recording()
    return {e["op"]: e["kind"] for e in C._coverage()}


@pytest.fixture
def preferences():
    """Sets preferences inside a test; restores the shipped ones after."""
    saved = _implementations.current()
    yield torch_infini._C._set_implementation_preferences
    torch_infini._C._set_implementation_preferences(saved)


@pytest.mark.skipif(not BOTH_KINDS, reason="needs native and ATen-backed implementations of Mul: InfiniRT's CPU "
                                            "backend with InfiniOps built WITH_TORCH=ON")
def test_the_faster_kind_serves_the_call(preferences):
    a, b = torch.randn(300), torch.randn(300)
    x, y = a.to(DEV), b.to(DEV)
    kinds = _served_as(lambda: torch.mul(x, y))
    assert kinds.get("aten::mul.Tensor") == "aten-backed", kinds
    torch.testing.assert_close(torch.mul(x, y).cpu(), torch.mul(a, b), rtol=0, atol=0)
    # Measured otherwise for small outputs: the native kernel below 256 elements.
    preferences([("cpu", "Mul", 256, "native"), ("cpu", "Mul", -1, "aten"), ("cpu", "*", -1, "aten")])
    small, large = torch.randn(100), torch.randn(300)
    assert _served_as(lambda: torch.mul(small.to(DEV), small.to(DEV)))["aten::mul.Tensor"] == "native"
    assert _served_as(lambda: torch.mul(large.to(DEV), large.to(DEV)))["aten::mul.Tensor"] == "aten-backed"
    torch.testing.assert_close(torch.mul(small.to(DEV), small.to(DEV)).cpu(), small * small)
