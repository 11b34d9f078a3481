"""Sparse COO tensors on the host runtime (csrc/ops/sparse/sparse_coo.cpp):
creation, coalesce, indices and values, index_select, add_, to_dense, the
sparse gradients of embedding and embedding_bag, and SGD, Adagrad and
SparseAdam steps, each bit for bit against CPU."""

from __future__ import annotations

import copy

import pytest
import torch

from infini_testing import DEV, on_host

pytestmark = pytest.mark.skipif(not on_host(), reason="sparse tensors are served by the host runtime only")


def sparse_pair():
    i = torch.tensor([[0, 2, 1, 2], [1, 0, 3, 0]])
    v = torch.tensor([1.5, -2.0, 3.25, 4.0])
    cpu = torch.sparse_coo_tensor(i, v, (3, 4))
    dev = torch.sparse_coo_tensor(i.to(DEV), v.to(DEV), (3, 4))
    return cpu, dev


def assert_sparse_equal(got, want):
    assert got.device.type == "infini" and got.is_sparse == want.is_sparse
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.is_sparse:
        assert got.is_coalesced() == want.is_coalesced() and got._nnz() == want._nnz()
        assert torch.equal(got._indices().cpu(), want._indices())
        assert torch.equal(got._values().cpu(), want._values())
    else:
        assert torch.equal(got.cpu(), want)


def test_creation_and_structure():
    cpu, dev = sparse_pair()
    assert dev.is_sparse and dev.device == torch.device(DEV) and dev.layout == torch.sparse_coo
    assert (dev.sparse_dim(), dev.dense_dim(), dev._nnz()) == (cpu.sparse_dim(), cpu.dense_dim(), cpu._nnz())
    assert_sparse_equal(dev, cpu)
    assert_sparse_equal(torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).to(DEV).to_sparse(),
                        torch.randn(3, 4, generator=torch.Generator().manual_seed(0)).to_sparse())


def test_coalesce_indices_values_to_dense():
    cpu, dev = sparse_pair()
    assert_sparse_equal(dev.coalesce(), cpu.coalesce())
    assert torch.equal(dev.coalesce().indices().cpu(), cpu.coalesce().indices())
    assert torch.equal(dev.coalesce().values().cpu(), cpu.coalesce().values())
    assert_sparse_equal(dev.to_dense(), cpu.to_dense())


def test_values_is_a_view_of_the_tensor():
    cpu, dev = sparse_pair()
    dev._values().mul_(2)
    cpu._values().mul_(2)
    assert_sparse_equal(dev, cpu)


def test_index_select_and_add_():
    cpu, dev = sparse_pair()
    index = torch.tensor([2, 0])
    assert_sparse_equal(dev.index_select(0, index.to(DEV)), cpu.index_select(0, index))
    other_cpu, other_dev = sparse_pair()
    cpu.add_(other_cpu.coalesce(), alpha=0.5)
    dev.add_(other_dev.coalesce(), alpha=0.5)
    assert_sparse_equal(dev, cpu)
    dense = torch.arange(12.0).reshape(3, 4)
    dense_dev = dense.to(DEV)
    dense.add_(cpu, alpha=-1)
    dense_dev.add_(dev, alpha=-1)
    assert_sparse_equal(dense_dev, dense)


def test_moves_between_devices():
    cpu, dev = sparse_pair()
    assert_sparse_equal(cpu.to(DEV), cpu)
    back = dev.to("cpu")
    assert back.device.type == "cpu" and torch.equal(back.to_dense(), cpu.to_dense())


@pytest.mark.parametrize("module", ["embedding", "embedding_bag"])
def test_sparse_gradients(module):
    torch.manual_seed(0)
    if module == "embedding":
        m = torch.nn.Embedding(10, 4, sparse=True)
        args = (torch.tensor([[1, 2, 4, 5], [4, 3, 2, 9]]),)
    else:
        m = torch.nn.EmbeddingBag(10, 4, mode="mean", sparse=True)
        args = (torch.tensor([1, 2, 4, 5, 4, 3, 2, 9]), torch.tensor([0, 3]))
    d = copy.deepcopy(m).to(DEV)
    m(*args).pow(2).sum().backward()
    d(*[a.to(DEV) for a in args]).pow(2).sum().backward()
    assert d.weight.grad.is_sparse
    assert_sparse_equal(d.weight.grad, m.weight.grad)


@pytest.mark.parametrize("optimizer", [
    pytest.param(lambda p: torch.optim.SGD(p, lr=0.1), id="SGD"),
    pytest.param(lambda p: torch.optim.Adagrad(p, lr=0.1), id="Adagrad"),
    pytest.param(lambda p: torch.optim.SparseAdam(p, lr=0.01), id="SparseAdam"),
])
def test_sparse_training_equals_cpu_bit_for_bit(optimizer):
    torch.manual_seed(1)
    bag = torch.nn.EmbeddingBag(50, 8, mode="sum", sparse=True)
    bag_dev = copy.deepcopy(bag).to(DEV)
    opt, opt_dev = optimizer(bag.parameters()), optimizer(bag_dev.parameters())
    g = torch.Generator().manual_seed(2)
    for _ in range(5):
        index = torch.randint(0, 50, (12,), generator=g)
        offsets = torch.tensor([0, 4, 9])
        target = torch.randn(3, 8, generator=g)
        for model, o, dev in ((bag, opt, "cpu"), (bag_dev, opt_dev, DEV)):
            o.zero_grad()
            loss = (model(index.to(dev), offsets.to(dev)) - target.to(dev)).pow(2).mean()
            loss.backward()
            o.step()
    assert torch.equal(bag_dev.weight.detach().cpu(), bag.weight.detach())


def test_compressed_layouts_are_refused_naming_the_operator():
    x = torch.eye(3).to(DEV)
    with pytest.raises(NotImplementedError, match="compressed sparse layouts"):
        x.to_sparse_csr() + 1
