"""embedding, index_select, cat, where, masked_fill, masked_select, triu/tril,
arange, equal on infini against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infini_testing import DEV, FLOAT_IDS, FLOATS, matches_cpu, sample, unserved_skips


def values(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_embedding_and_index_select(dtype):
    weight, ids = values(10, 4, dtype=dtype), torch.tensor([[1, 3, 3], [0, 9, 2]])
    matches_cpu(F.embedding, ids, weight)
    matches_cpu(lambda w, i: w.index_select(0, i), weight, torch.tensor([4, 4, 0]))
    matches_cpu(lambda w, i: w.t().index_select(1, i), weight, torch.tensor([2, 7]))
    matches_cpu(lambda w, i: w.index_select(0, i), weight, torch.tensor([], dtype=torch.int64))


def test_embedding_backward_accumulates_repeated_ids():
    weight, ids = values(6, 3), torch.tensor([1, 1, 4, 1])
    w_cpu = weight.clone().requires_grad_()
    F.embedding(ids, w_cpu).sum().backward()
    w_dev = weight.to(DEV).requires_grad_()
    unserved_skips(lambda: F.embedding(ids.to(DEV), w_dev).sum().backward())
    assert torch.equal(w_dev.grad.cpu(), w_cpu.grad)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool], ids=FLOAT_IDS + ["int64", "bool"])
def test_cat(dtype):
    a, b = sample((2, 3), dtype), sample((4, 3), dtype)
    matches_cpu(lambda a, b: torch.cat([a, b]), a, b)
    matches_cpu(lambda a, b: torch.cat([a.t(), b.t()], dim=1), a, b)     # strided inputs
    matches_cpu(lambda a, b: torch.cat([a, b, a], dim=-2), a, b)
    matches_cpu(lambda a, e: torch.cat([a, e]), a, torch.empty(0, dtype=dtype))  # legacy empty skipped


def test_where_masked_fill_masked_select():
    x, y = values(3, 4), values(4, seed=1)
    matches_cpu(lambda x, y: torch.where(x > 0, x, y), x, y)
    matches_cpu(lambda x: torch.where(x > 0, x, 0.0), x)
    matches_cpu(lambda x: x.masked_fill(x < 0, float("-inf")), x)
    matches_cpu(lambda x, v: x.clone().masked_fill_(x > 0.5, v), x, torch.tensor(2.0))
    matches_cpu(lambda x: x.clone().masked_fill_(x > 0.5, torch.tensor(-3.0)), x)  # a CPU value, as CUDA takes
    matches_cpu(lambda x: torch.masked_select(x, x > 0), x)
    matches_cpu(lambda x: torch.masked_select(x, x > 100), x)     # nothing selected


@pytest.mark.parametrize("k", [-1, 0, 2])
def test_triu_tril(k):
    x = values(2, 4, 5)
    matches_cpu(lambda x: x.triu(k), x)
    matches_cpu(lambda x: x.tril(k), x)
    matches_cpu(lambda x: x.clone().triu_(k), x)
    m = torch.full((5, 5), float("-inf"), device=DEV).triu(1)
    assert torch.equal(m.cpu(), torch.full((5, 5), float("-inf")).triu(1))


@pytest.mark.parametrize("args", [(5,), (2, 9), (0, 1, 0.25), (10, 0, -3)], ids=str)
def test_arange(args):
    want = torch.arange(*args)
    got = unserved_skips(lambda: torch.arange(*args, device=DEV))
    assert got.device.type == "infini" and got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert torch.equal(torch.arange(4, dtype=torch.float16, device=DEV).cpu(), torch.arange(4, dtype=torch.float16))


def test_equal():
    x = values(3, 4).to(DEV)
    assert torch.equal(x, x.clone())
    assert not torch.equal(x, x + 1)
    assert not torch.equal(x, x[:2])
    assert torch.equal(torch.tensor([1, 2], device=DEV), torch.tensor([1.0, 2.0], device=DEV))
    assert not torch.equal(torch.tensor([float("nan")], device=DEV), torch.tensor([float("nan")], device=DEV))
    with pytest.raises(RuntimeError, match="infini"):
        torch.equal(x, x.cpu())
