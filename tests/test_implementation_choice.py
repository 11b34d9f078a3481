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
    assert ("cpu", "*", -1, "aten", ()) in rows  # the CPU backend's default
    assert sorted(_implementations.current()) == sorted(rows)


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(format=99), "format"),
    (lambda d: d["backends"]["cpu"].update(default="fast"), "default"),
    (lambda d: d["backends"]["cpu"]["operators"].update(Mul=[{"below": None, "faster": "gpu"}]), "faster"),
    (lambda d: d["backends"]["cpu"]["operators"].update(Mul=[{"below": 1024, "faster": "aten"}]), "end with"),
    (lambda d: d["backends"]["cpu"]["operators"].update(
        Mul=[{"below": None, "faster": "native", "dtypes": ["float"]}]), "dtype names"),
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
    # ATen-backed at every size first (the shipped data may choose native for small outputs).
    preferences([("cpu", "*", -1, "aten", ())])
    a, b = torch.randn(300), torch.randn(300)
    x, y = a.to(DEV), b.to(DEV)
    kinds = _served_as(lambda: torch.mul(x, y))
    assert kinds.get("aten::mul.Tensor") == "aten-backed", kinds
    torch.testing.assert_close(torch.mul(x, y).cpu(), torch.mul(a, b), rtol=0, atol=0)
    # Measured otherwise for small outputs: the native kernel below 256 elements.
    preferences([("cpu", "Mul", 256, "native", ()), ("cpu", "Mul", -1, "aten", ()), ("cpu", "*", -1, "aten", ())])
    small, large = torch.randn(100), torch.randn(300)
    assert _served_as(lambda: torch.mul(small.to(DEV), small.to(DEV)))["aten::mul.Tensor"] == "native"
    assert _served_as(lambda: torch.mul(large.to(DEV), large.to(DEV)))["aten::mul.Tensor"] == "aten-backed"
    torch.testing.assert_close(torch.mul(small.to(DEV), small.to(DEV)).cpu(), small * small)
    # A native answer limited to the dtypes it computes exactly in: an output of another takes the default.
    preferences([("cpu", "Mul", 256, "native", ("float32",)), ("cpu", "Mul", -1, "aten", ()),
                 ("cpu", "*", -1, "aten", ())])
    assert _served_as(lambda: torch.mul(small.to(DEV), small.to(DEV)))["aten::mul.Tensor"] == "native"
    half = small.half()
    assert _served_as(lambda: torch.mul(half.to(DEV), half.to(DEV)))["aten::mul.Tensor"] == "aten-backed"
    torch.testing.assert_close(torch.mul(half.to(DEV), half.to(DEV)).cpu(), half * half, rtol=0, atol=0)


@pytest.mark.skipif(not BOTH_KINDS, reason="needs native and ATen-backed implementations of Mul: InfiniRT's CPU "
                                            "backend with InfiniOps built WITH_TORCH=ON")
def test_a_size_class_holds_for_the_form_it_was_measured_in(preferences):
    """Size classes were measured on contiguous operands of the output's
    size (or of one element); a broadcast or transposed input takes the
    answer for any size."""
    preferences([("cpu", "Mul", 1024, "native", ()), ("cpu", "Mul", -1, "aten", ()), ("cpu", "*", -1, "aten", ())])
    a, row, scale = torch.randn(2, 12, 32), torch.randn(32, 24), torch.randn(2, 12, 1)
    x, r, s = a.to(DEV), row.to(DEV), scale.to(DEV)
    measured = {
        "same size": (lambda: x * x, lambda: a * a, "native"),
        "a Python number": (lambda: x * 0.5, lambda: a * 0.5, "native"),
        "a broadcast input": (lambda: x * s, lambda: a * scale, "aten-backed"),
        "a transposed input": (lambda: r.t() * r.t().contiguous(), lambda: row.t() * row.t().contiguous(),
                               "aten-backed"),
    }
    for form, (on_device, on_cpu, kind) in measured.items():
        assert _served_as(on_device)["aten::mul.Tensor"] == kind, form
        torch.testing.assert_close(on_device().cpu(), on_cpu(), rtol=0, atol=0)


@pytest.mark.skipif(not BOTH_KINDS, reason="needs native and ATen-backed implementations: InfiniRT's CPU backend "
                                            "with InfiniOps built WITH_TORCH=ON")
def test_a_cat_has_the_measured_form_in_one_dimension_only(preferences):
    """InfiniOps' native Cat finds each element's place axis by axis, and
    its sizes were measured on 1-D tensors: a cat of higher rank (a
    transformer's key cache) takes the answer for any size."""
    preferences([("cpu", "Cat", 1024, "native", ()), ("cpu", "Cat", -1, "aten", ()), ("cpu", "*", -1, "aten", ())])
    flat, cache = torch.randn(300), torch.randn(2, 2, 12, 16)
    x, k = flat.to(DEV), cache.to(DEV)
    forms = {
        "1-D": (lambda: torch.cat([x, x]), lambda: torch.cat([flat, flat]), "native"),
        "4-D after a legacy empty input": (lambda: torch.cat([torch.empty(0, device=DEV), k], -2),
                                           lambda: torch.cat([torch.empty(0), cache], -2), "aten-backed"),
        "4-D": (lambda: torch.cat([k, k], 1), lambda: torch.cat([cache, cache], 1), "aten-backed"),
    }
    for form, (on_device, on_cpu, kind) in forms.items():
        assert _served_as(on_device)["aten::cat"] == kind, form
        torch.testing.assert_close(on_device().cpu(), on_cpu(), rtol=0, atol=0)


# How each InfiniOps operator the data may name is called, on inputs of an output's size.
CALLS = {
    "Add": [lambda a, b: a + b, lambda a, b: a + 0.1],
    "Mul": [lambda a, b: a * b, lambda a, b: a * 0.1],
    "Relu": [lambda a, b: torch.relu(a)],
    "Silu": [lambda a, b: torch.nn.functional.silu(a)],
    "Cat": [lambda a, b: torch.cat([a[: a.numel() // 2], b[: b.numel() - b.numel() // 2]])],
}


@pytest.mark.skipif(not BOTH_KINDS, reason="needs native and ATen-backed implementations: InfiniRT's CPU backend "
                                            "with InfiniOps built WITH_TORCH=ON")
def test_the_shipped_native_answers_give_cpu_eager_results_bit_for_bit():
    """Every native size class of the shipped data, in each dtype it names,
    at two elements and its largest size: equal to CPU eager bit for bit
    (served native where the build's native kernel takes the dtype; the
    others run ATen-backed, as the benchmark's check of them did)."""
    checked = served_native = 0
    for backend, op, below, kind, dtypes in _implementations.rows(_implementations.load()):
        if backend != "cpu" or kind != "native":
            continue
        assert dtypes, f"{op}: a native class must name its dtypes"
        assert op in CALLS, f"{op}: add how it is called to CALLS"
        for name in dtypes:
            dtype = getattr(torch, name)
            for numel in (2, below - 1):
                a, b = ((torch.randn(numel) * 3).to(dtype) for _ in range(2))
                for call in CALLS[op]:
                    kinds = _served_as(lambda: call(a.to(DEV), b.to(DEV)))
                    served_native += "native" in kinds.values()
                    torch.testing.assert_close(call(a.to(DEV), b.to(DEV)).cpu(), call(a, b), rtol=0, atol=0,
                                               equal_nan=True, msg=lambda m: f"{op} {name} {numel}: {m}")
                    checked += 1
    assert served_native > 0 or not any(r[3] == "native" for r in _implementations.current()), checked
