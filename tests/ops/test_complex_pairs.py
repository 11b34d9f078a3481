"""The rule by which the Infini stack passes complex operands to ATen as pairs.

InfiniRT has no complex DataType, so the stack hands InfiniOps a complex
tensor as a view of its parts (complex64 [.., n] as float32 [.., n, 2]), and
InfiniOps' ATen-backed implementation hands ATen that float tensor
(csrc/runtime/complex_pairs.h). The stack does so only for the operators of
a reviewed table, which move, select or copy whole elements; the other
arguments follow the new trailing dimension (dims made non-negative, index
tensors spread over the pair, where's condition broadcast beside it).

These tests check the rule against CPU PyTorch with no stack needed: for
every table entry, ATen's ``.out`` overload (the form the stack calls) on
the pairs writes, bit for bit, what CPU PyTorch returns on the complex
values, special values included; and what the rule refuses computes
otherwise on the pairs (shown case by case). Then each case runs on the
infini device against CPU: on the host runtime that is ATen's CPU kernel;
on an Infini stack it is InfiniOps' ATen-backed implementation reached
through the pairs, which the coverage record shows.
"""

from __future__ import annotations

import pytest
import torch

import torch_infini
from torch_infini import _C, fallback
from infini_testing import DEV, on_host

aten = torch.ops.aten
INF, NAN = float("inf"), float("nan")
# Every part a complex value can have, zeros of both signs, infinities and
# NaN among them: moving whole elements keeps each bit.
PARTS = torch.tensor([0.0, -0.0, 1.5, -2.25, INF, -INF, NAN, 3.0])
Z = torch.complex(PARTS.repeat(6), PARTS.repeat_interleave(6)).reshape(8, 6)
W = torch.complex(-PARTS.repeat(6), PARTS.repeat(6).flip(0)).reshape(8, 6)
Z128 = Z.to(torch.complex128)
COND = (torch.arange(48) % 3 == 1).reshape(8, 6)
IDX = torch.tensor([5, 0, 3, 3])
GATHER = torch.tensor([[5, 0, 2], [1, 1, 4]] * 4)
SCATTER = torch.tensor([[5, 0, 2], [1, 3, 4]] * 4)
ALONG = torch.tensor([[5, 0, 2, 7, 7, 3]])

# name: (functional overload, .out overload, arguments, .out's output names)
CASES = {
    "where": (aten.where.self, aten.where.self_out, (COND, Z, W), ("out",)),
    "where_broadcast": (aten.where.self, aten.where.self_out, (COND[:, :1], Z, W[0]), ("out",)),
    "where_complex128": (aten.where.self, aten.where.self_out, (COND, Z128, -Z128), ("out",)),
    "cat": (aten.cat.default, aten.cat.out, ([Z, W[:, :2]], -1), ("out",)),
    "cat_rows": (aten.cat.default, aten.cat.out, ([Z, W.t().contiguous().t()], 0), ("out",)),
    "stack": (aten.stack.default, aten.stack.out, ([Z, W], -1), ("out",)),
    "index_select": (aten.index_select.default, aten.index_select.out, (Z, -1, IDX), ("out",)),
    "index_copy": (aten.index_copy.default, aten.index_copy.out, (Z, 0, IDX[:2] + 1, W[:2]), ("out",)),
    "narrow_copy": (aten.narrow_copy.default, aten.narrow_copy.out, (Z, -1, 1, 3), ("out",)),
    "gather": (aten.gather.default, aten.gather.out, (Z, 1, GATHER), ("out",)),
    "gather_last": (aten.gather.default, aten.gather.out, (Z.t(), -1, GATHER[:6, :2]), ("out",)),
    "take_along_dim": (aten.take_along_dim.default, aten.take_along_dim.out, (Z, ALONG, 0), ("out",)),
    "scatter": (aten.scatter.src, aten.scatter.src_out, (Z, 1, SCATTER, W), ("out",)),
}


def _bits(t: torch.Tensor) -> torch.Tensor:
    """`t`'s parts as integers (so -0.0 and NaN compare by their bits)."""
    parts = torch.view_as_real(t) if t.is_complex() else t
    return parts.contiguous().view({2: torch.int16, 4: torch.int32, 8: torch.int64}[parts.element_size()])


def _args(overload, arguments, outs) -> list:
    """Every argument of `overload` by index: the given ones, the outputs by
    name, the schema's defaults for the rest."""
    by_name = dict(outs)
    values = []
    for i, a in enumerate(overload._schema.arguments):
        if a.name in by_name:
            values.append(by_name[a.name])
        elif i < len(arguments):
            values.append(arguments[i])
        else:
            values.append(a.default_value if a.has_default_value() else None)
    return values


def _reason(overload, arguments, outs=()) -> str:
    return _C._complex_pairs_reason(overload._schema.name, overload._schema.overload_name,
                                    _args(overload, arguments, outs))


def _as_pairs(overload, arguments, outs) -> dict:
    pairs = _C._complex_as_pairs(overload._schema.name, overload._schema.overload_name,
                                 _args(overload, arguments, outs))
    return {a.name: v for a, v in zip(overload._schema.arguments, pairs)}


def test_cases_cover_the_table():
    """Every operator the rule admits is checked against CPU below."""
    tested = {"aten::" + functional._schema.name.split("::")[1] for functional, *_ in CASES.values()}
    assert tested == set(_C._complex_pairs_table())


@pytest.mark.parametrize("case", CASES)
def test_pairs_compute_what_cpu_computes_on_complex_values(case):
    functional, out_overload, arguments, out_names = CASES[case]
    expected = functional(*arguments)
    outs = [(name, torch.empty_like(expected)) for name in out_names]
    assert _reason(out_overload, arguments, outs) == ""
    pairs = _as_pairs(out_overload, arguments, outs)
    # Every complex tensor reaches ATen as its parts: no complex dtype left.
    flat = [v for v in pairs.values() for v in (v if isinstance(v, list) else [v])]
    assert not any(isinstance(v, torch.Tensor) and v.is_complex() for v in flat)
    out_overload(**pairs)
    (name, out), = outs
    assert out.dtype == expected.dtype and out.shape == expected.shape
    assert torch.equal(_bits(out), _bits(expected)), name


def _differs(complex_result: torch.Tensor, pairs_result: torch.Tensor) -> bool:
    return not torch.equal(_bits(complex_result), _bits(torch.view_as_complex(pairs_result.contiguous())))


# Arithmetic looks componentwise but is not, bit for bit: PyTorch's complex
# add computes a + alpha * b with a complex multiply by alpha = 1 + 0i (an
# infinite imaginary part gives a NaN real part; -0 + -0 gives +0), its
# negation of a zero part is +0, and multiplying by a real scalar multiplies
# by scalar + 0i.
@pytest.mark.parametrize("overload, arguments, pairs_differ", [
    (aten.add.out, (Z, W), lambda: _differs(Z + W, torch.view_as_real(Z) + torch.view_as_real(W))),
    (aten.sub.out, (Z, W), lambda: _differs(Z - W, torch.view_as_real(Z) - torch.view_as_real(W))),
    (aten.neg.out, (Z,), lambda: _differs(-Z, -torch.view_as_real(Z))),
    (aten.mul.out, (Z, torch.tensor(2.0)), lambda: _differs(Z * 2.0, torch.view_as_real(Z) * 2.0)),
], ids=["add", "sub", "neg", "mul_by_real"])
def test_arithmetic_is_refused_as_its_pairs_compute_otherwise(overload, arguments, pairs_differ):
    out = torch.empty_like(Z)
    assert "is not one of the operators" in _reason(overload, arguments, [("out", out)])
    assert pairs_differ()


def test_a_real_operand_promoted_with_complex_ones_is_refused():
    """where(cond, complex, float) computes in complex: the float operand
    would have to become value + 0i, which its bits are not."""
    out = torch.empty_like(Z)
    assert "promotes a float32 tensor with complex ones" in _reason(aten.where.self_out, (COND, Z, PARTS[:6]),
                                                                   [("out", out)])
    assert "promotes complex64 with complex128" in _reason(aten.where.self_out, (COND, Z, Z128),
                                                           [("out", Z128.clone())])


def test_scatter_with_a_value_or_a_reduction_is_refused():
    out = torch.empty_like(Z)
    assert "with 'value'" in _reason(aten.scatter.value_out, (Z, 1, SCATTER, 2.0), [("out", out)])
    assert "with 'reduce'" in _reason(aten.scatter.reduce_out, (Z, 1, SCATTER, W, "add"), [("out", out)])
    # The oracle: a real value fills a complex element with value + 0i, its
    # pairs with value twice.
    filled = torch.view_as_complex(torch.view_as_real(Z).scatter(1, SCATTER.unsqueeze(-1).expand(8, 3, 2), 2.0))
    assert not torch.equal(_bits(filled), _bits(Z.scatter(1, SCATTER, 2.0)))


def test_take_along_dim_without_dim_is_refused():
    """Without dim it flattens its input, which would take each pair apart."""
    flat = GATHER[:2].flatten()
    assert "without 'dim' flattens" in _reason(aten.take_along_dim.out, (Z, flat, None),
                                               [("out", torch.empty(6, dtype=Z.dtype))])
    assert not torch.equal(_bits(torch.take_along_dim(torch.view_as_real(Z), flat)), _bits(torch.view_as_real(
        torch.take_along_dim(Z, flat))))


def test_conjugated_and_zero_dim_and_legacy_empty_operands_are_refused():
    out = torch.empty_like(Z)
    assert "conjugated view" in _reason(aten.where.self_out, (COND, Z.conj(), W), [("out", out)])
    scalar = Z[0, 2]
    assert "0-dim complex tensor" in _reason(aten.index_select.out, (scalar, 0, IDX[:1] * 0),
                                             [("out", torch.empty((), dtype=Z.dtype))])
    legacy = torch.empty(0, dtype=Z.dtype)
    assert "skips a 1-D empty input" in _reason(aten.cat.out, ([Z, legacy], 0), [("out", torch.empty_like(Z))])


def test_calls_without_complex_tensors_are_not_its_concern():
    assert _reason(aten.neg.out, (PARTS,), [("out", torch.empty_like(PARTS))]) == ""


# --- on the infini device ---------------------------------------------------


def _to_device(value):
    if isinstance(value, torch.Tensor):
        return value.to(DEV)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v) for v in value)
    return value


@pytest.mark.parametrize("case", CASES)
def test_each_case_on_infini_equals_cpu(case):
    """On the host runtime ATen's CPU kernel runs it; on an Infini stack,
    InfiniOps' ATen-backed implementation on the pairs: the coverage record
    says aten-backed (for stack and take_along_dim, which run as their
    parts, cat and gather: composite), with no fallback and no refusal.
    InfiniOps built WITH_TORCH=OFF has no ATen-backed implementation: there
    only what runs otherwise is served (narrow_copy, as its decomposition: a
    view and a copy, which moves whole elements as bytes), never through
    the pairs."""
    functional, _, arguments, _ = CASES[case]
    expected = functional(*arguments)
    with fallback.recording():
        actual = functional(*_to_device(arguments))
        torch.infini.synchronize()
    assert torch.equal(_bits(actual.cpu()), _bits(expected))
    rows = fallback.coverage()
    name = functional._schema.name + ("." + functional._schema.overload_name if functional._schema.overload_name
                                      else "")
    kinds = {r["kind"] for r in rows if r["op"] == name}
    assert kinds in ({"composite"}, {"native"} if on_host() else {"aten-backed"}), rows
    assert not [r for r in rows if r["kind"] in ("fallback", "unsupported")], rows
    if on_host():
        return
    if torch_infini.build_info()["infini_ops_aten_backed"]:
        assert any(r["kind"] == "aten-backed" and r["complex_calls"] == r["calls"] for r in rows), rows
    else:
        assert kinds == {"composite"} and not [r for r in rows if r["kind"] == "aten-backed"], rows


def test_outside_the_table_the_stack_names_the_missing_datatype():
    """neg on complex: on the host runtime ATen's CPU kernel; on an Infini
    stack refused naming InfiniRT's missing complex64 DataType."""
    z = Z.to(DEV)
    if on_host():
        assert torch.equal(_bits((-z).cpu()), _bits(-Z))
        return
    with pytest.raises(NotImplementedError, match="InfiniRT has no complex64 DataType"):
        -z
