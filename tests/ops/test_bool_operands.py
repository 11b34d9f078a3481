"""The rule by which the Infini stack passes bool operands to ATen as their bytes.

InfiniRT has no bool DataType, so the stack hands InfiniOps a bool tensor
viewed as uint8, and InfiniOps' ATen-backed implementation hands ATen that
uint8 tensor (csrc/runtime/bool_operands.h). The stack does so only for the
operators of a reviewed table, under a promotion rule. These tests check
the rule against CPU PyTorch, with no stack needed: for every operator of
the table, ATen's ``.out`` overload (the form the stack calls) on the bytes
writes the bytes CPU PyTorch returns for the bools; and what the rule
refuses is what would compute otherwise.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from torch_infini import _C

aten = torch.ops.aten
# Every pair of truth values, repeated: elementwise operators meet each one.
A = torch.tensor([False, False, True, True] * 6)
B = torch.tensor([False, True, False, True] * 6)
R = torch.rand(24) < 0.5
F = torch.randn(24)
M = torch.rand(6, 5) < 0.5
IDX = torch.tensor([3, 0, 23, 7, 7])

# name: (functional overload, .out overload, inputs, other arguments after
# the inputs, the .out overload's output names)
CASES = {
    "where": (aten.where.self, aten.where.self_out, (A, F, -F), (), ("out",)),
    "where_bool_values": (aten.where.self, aten.where.self_out, (A, B, R), (), ("out",)),
    "logical_and": (aten.logical_and.default, aten.logical_and.out, (A, B), (), ("out",)),
    "logical_and_float": (aten.logical_and.default, aten.logical_and.out, (A, F), (), ("out",)),
    "logical_or": (aten.logical_or.default, aten.logical_or.out, (A, B), (), ("out",)),
    "logical_xor": (aten.logical_xor.default, aten.logical_xor.out, (A, B), (), ("out",)),
    "logical_not": (aten.logical_not.default, aten.logical_not.out, (R,), (), ("out",)),
    "bitwise_and": (aten.bitwise_and.Tensor, aten.bitwise_and.Tensor_out, (A, B), (), ("out",)),
    "bitwise_or": (aten.bitwise_or.Tensor, aten.bitwise_or.Tensor_out, (A, B), (), ("out",)),
    "bitwise_xor": (aten.bitwise_xor.Tensor, aten.bitwise_xor.Tensor_out, (A, B), (), ("out",)),
    "eq": (aten.eq.Tensor, aten.eq.Tensor_out, (A, B), (), ("out",)),
    "ne": (aten.ne.Tensor, aten.ne.Tensor_out, (A, B), (), ("out",)),
    "lt": (aten.lt.Tensor, aten.lt.Tensor_out, (A, B), (), ("out",)),
    "le": (aten.le.Tensor, aten.le.Tensor_out, (A, B), (), ("out",)),
    "gt": (aten.gt.Tensor, aten.gt.Tensor_out, (A, B), (), ("out",)),
    "ge_float": (aten.ge.Tensor, aten.ge.Tensor_out, (A, F.abs().round()), (), ("out",)),
    "mul": (aten.mul.Tensor, aten.mul.out, (A, B), (), ("out",)),
    "mul_float": (aten.mul.Tensor, aten.mul.out, (A, F), (), ("out",)),
    "prod": (aten.prod.dim_int, aten.prod.int_out, (R,), (0,), ("out",)),
    "cumprod": (aten.cumprod.default, aten.cumprod.out, (R,), (0,), ("out",)),
    "tril": (aten.tril.default, aten.tril.out, (M,), (0,), ("out",)),
    "triu": (aten.triu.default, aten.triu.out, (M,), (1,), ("out",)),
    "amax": (aten.amax.default, aten.amax.out, (M,), ([1],), ("out",)),
    "amin": (aten.amin.default, aten.amin.out, (M,), ([0],), ("out",)),
    "maximum": (aten.maximum.default, aten.maximum.out, (A, B), (), ("out",)),
    "minimum": (aten.minimum.default, aten.minimum.out, (A, B), (), ("out",)),
    "max": (aten.max.dim, aten.max.dim_max, (M,), (1,), ("max", "max_values")),
    "min": (aten.min.dim, aten.min.dim_min, (M,), (0,), ("min", "min_indices")),
    "index_select": (aten.index_select.default, aten.index_select.out, (R,), (0, IDX), ("out",)),
    "gather": (aten.gather.default, aten.gather.out, (M,), (1, torch.tensor([[4, 0], [1, 1]] * 3)), ("out",)),
    "sum": (aten.sum.dim_IntList, aten.sum.IntList_out, (M,), ([1],), ("out",)),
    "nansum": (aten.nansum.default, aten.nansum.out, (M,), ([0],), ("out",)),
    "cumsum": (aten.cumsum.default, aten.cumsum.out, (R,), (0,), ("out",)),
}


def _as_bytes(t):
    return t.view(torch.uint8) if isinstance(t, torch.Tensor) and t.dtype == torch.bool else t


def _schema_args(overload, inputs, rest, outs):
    """The call's tensors by the overload's argument index (None for the rest)."""
    values = list(inputs) + list(rest)
    by_name = dict(outs)
    args = []
    for i, a in enumerate(overload._schema.arguments):
        if a.name in by_name:
            args.append(by_name[a.name])
        elif i < len(values) and isinstance(values[i], torch.Tensor):
            args.append(values[i])
        else:
            args.append(None)
    return args


def test_cases_cover_the_table():
    """Every operator the rule admits is checked against CPU below."""
    table = {name for name, _, _ in _C._bool_operands_table()}
    tested = {"aten::" + functional._schema.name.split("::")[1] for functional, *_ in CASES.values()}
    assert tested == table


@pytest.mark.parametrize("case", CASES)
def test_bytes_compute_what_cpu_computes_on_bools(case):
    functional, out_overload, inputs, rest, out_names = CASES[case]
    expected = functional(*inputs, *rest)
    expected = expected if isinstance(expected, tuple) else (expected,)
    # The outputs as the stack gives them: bool ones as their bytes.
    outs = [(n, torch.empty_like(e)) for n, e in zip(out_names, expected)]
    reason = _C._bool_operands_reason(out_overload._schema.name, out_overload._schema.overload_name,
                                      _schema_args(out_overload, inputs, rest, outs))
    assert reason == "", reason
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # where's uint8 condition is deprecated
        out_overload(*[_as_bytes(t) for t in inputs], *rest, **{n: _as_bytes(o) for n, o in outs})
    for (name, out), e in zip(outs, expected):
        assert out.dtype == e.dtype
        # Bit-equal, bool results compared as bytes (a bool byte other than
        # 0 or 1 would compare equal as a bool).
        assert torch.equal(_as_bytes(out), _as_bytes(e)), name


def _reason(overload, *args):
    return _C._bool_operands_reason(overload._schema.name, overload._schema.overload_name, list(args))


def test_a_bool_meeting_an_integer_is_refused_as_its_bytes_would_promote_otherwise():
    """mul(bool, 0-dim int64) computes in int64; on uint8 bytes, in uint8."""
    big = torch.tensor(300)
    out = torch.empty(24, dtype=torch.int64)
    assert "promotes a bool operand with an integer one" in _reason(aten.mul.out, A, big, out)
    # The oracle: the bytes would give another result.
    assert not torch.equal(aten.mul.out(_as_bytes(A), big, out=torch.empty_like(out)), torch.mul(A, big))
    # where's condition takes no part in promotion.
    assert _reason(aten.where.self_out, A, IDX[:1].expand(24), torch.tensor(-1),
                   torch.empty(24, dtype=torch.int64)) == ""


def test_a_count_into_a_bool_is_refused():
    out = torch.empty(6, dtype=torch.bool)
    assert "counts true values" in _reason(aten.sum.IntList_out, M, None, None, None, out)
    # The oracle: ATen's bool sum is true for any count, the bytes' sum is the count.
    counts = aten.sum.IntList_out(_as_bytes(M), [1], out=torch.empty(6, dtype=torch.uint8))
    assert counts.max() > 1 and torch.equal(M.sum(1, dtype=torch.bool).view(torch.uint8), (counts > 0).to(torch.uint8))


def _masked_fill_refuses_bytes():
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        F.clone().masked_fill_(_as_bytes(A), 0.0)
    return True


@pytest.mark.parametrize("overload, args, bytes_differ", [
    # ~1 is 254 on a byte.
    (aten.bitwise_not.out, (A, torch.empty(24, dtype=torch.bool)),
     lambda: not torch.equal(torch.bitwise_not(_as_bytes(A)), _as_bytes(torch.bitwise_not(A)))),
    # 1 + 1 is 2 on a byte, True on bools.
    (aten.add.out, (A, B, None, torch.empty(24, dtype=torch.bool)),
     lambda: not torch.equal(torch.add(_as_bytes(A), _as_bytes(B)), _as_bytes(torch.add(A, B)))),
    (aten.masked_fill.Scalar_out, (F, A, None, torch.empty(24)), _masked_fill_refuses_bytes),
], ids=["bitwise_not", "add", "masked_fill"])
def test_operators_outside_the_table_are_refused(overload, args, bytes_differ):
    assert "computes on bool operands otherwise" in _reason(overload, *args)
    assert bytes_differ()


def test_a_mask_among_indices_is_a_bool_operand():
    """x[mask]: index's indices are a Tensor?[] list, whose bool tensors are
    operands too (ATen would take a uint8 one for a deprecated mask, and its
    result's shape is the mask's count)."""
    x = torch.randn(5)
    assert "computes on bool operands otherwise" in _reason(aten.index.Tensor_out, x, [x > 0], torch.empty(0))


def test_calls_without_bool_operands_are_not_its_concern():
    assert _reason(aten.bitwise_not.out, IDX, torch.empty(5, dtype=torch.int64)) == ""
    # A bool output alone is not an operand.
    assert _reason(aten.eq.Tensor_out, F, F, torch.empty(24, dtype=torch.bool)) == ""
