"""embedding, index_select, cat, where, masked_fill, masked_select, triu/tril,
arange, equal on infini against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infini_testing import DEV, FLOAT_IDS, FLOATS, assert_same, matches_cpu, sample, unserved_skips


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


def test_masks_alike_but_for_their_values_each_index_their_own():
    """x[mask] = v in turn with masks of one shape and other values (Rprop's
    step): each writes where its own mask says, as on CPU. The Infini stack
    lays calls out by their metadata; a mask's count is its values'."""
    def step(x):
        x = x.clone()
        x[x.gt(0)] = 1.2
        x[x.lt(0)] = 0.5
        x[x.eq(0)] = 1.0
        return x, x[x > 1], torch.masked_select(x, x < 1)
    matches_cpu(step, torch.zeros(5))
    matches_cpu(step, torch.tensor([0.0, -1.0, 2.0, 0.0, -3.0]))


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


# CPU index tensors: CUDA accepts them in indexing and index_put (copied to the
# device), and refuses them in index_select and gather. Idioms such as
# x[torch.randperm(n)] depend on it.

def _cpu_index_cases():
    idx, mask = torch.tensor([0, 2, 2]), torch.tensor([True, False, True, True])
    return {
        "x[idx]": lambda x: x[idx],
        "x[mask]": lambda x: x[mask],
        "x[:, idx]": lambda x: x[:, idx],
        "x[idx, idx]": lambda x: x[idx, torch.tensor([1, 0, 2])],
        "x[randperm]": lambda x: x[torch.randperm(4, generator=torch.Generator().manual_seed(0))],
    }


@pytest.mark.parametrize("case", list(_cpu_index_cases()))
def test_cpu_index_tensors_index_as_on_cuda(case):
    fn = _cpu_index_cases()[case]
    x = values(4, 3)
    matches_cpu(fn, x)


@pytest.mark.parametrize("case", ["idx", "mask", "accumulate"])
def test_cpu_index_tensors_in_index_put(case):
    x = values(4, 3)
    idx, mask = torch.tensor([1, 3]), torch.tensor([True, False, False, True])

    def put(t):
        t = t.clone()
        if case == "idx":
            t[idx] = 1.5
        elif case == "mask":
            t[mask] = torch.tensor([2.0, 3.0, 4.0]).to(t.device)
        else:
            t.index_put_((idx,), torch.ones(2, 3).to(t.device), accumulate=True)
        return t

    matches_cpu(put, x)


def test_cpu_index_gradient_flows_as_on_cpu():
    x, idx = values(5, 2), torch.tensor([4, 0, 4])
    xc = x.clone().requires_grad_()
    xc[idx].sum().backward()
    xd = x.to(DEV).requires_grad_()
    unserved_skips(lambda: xd[idx].sum().backward())
    assert torch.equal(xd.grad.cpu(), xc.grad)


@pytest.mark.parametrize("op", ["index_select", "gather"])
def test_cpu_index_still_refused_where_cuda_refuses(op):
    x, idx = values(4, 3).to(DEV), torch.tensor([0, 1])
    with pytest.raises(RuntimeError, match="same|device"):
        if op == "index_select":
            x.index_select(0, idx)
        else:
            x.gather(0, idx.view(2, 1).expand(2, 3))


@pytest.mark.parametrize("value", [5.0, torch.tensor(-2.5)], ids=["scalar", "tensor"])
def test_index_fill_takes_a_cpu_index_as_cuda_does(value):
    x = sample((3, 5), torch.float32)
    index = torch.tensor([0, 3])
    want = x.clone().index_fill_(1, index, value)
    got = x.to(DEV).index_fill_(1, index, value)
    assert_same(got, want)
    assert_same(x.to(DEV).index_fill(1, index, value), x.index_fill(1, index, value))
