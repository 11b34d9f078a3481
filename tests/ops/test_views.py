"""View operators on infini: metadata only, sharing the base's memory, with
CPU's sizes, strides and offsets; writes through a view reach the base. Plus
the copies users make of views (contiguous, clone, .to(dtype))."""

from __future__ import annotations

import pytest
import torch

from infini_testing import DEV, FLOAT_IDS, FLOATS, assert_same, sample

VIEWS = {
    "view": lambda x: x.view(6, 4),
    "reshape": lambda x: x.reshape(4, 6),
    "reshape_alias": lambda x: x.transpose(0, 1).reshape(3, 2, 4),  # a view where CPU gives one
    "t": lambda x: x[0].t(),
    "transpose": lambda x: x.transpose(0, 2),
    "permute": lambda x: x.permute(2, 0, 1),
    "slice": lambda x: x[:, 1:, ::2],
    "select": lambda x: x[1, 2],
    "narrow": lambda x: x.narrow(2, 1, 2),
    "expand": lambda x: x[:, :1].expand(2, 5, 4),
    "squeeze": lambda x: x[:, :1].squeeze(1),
    "unsqueeze": lambda x: x.unsqueeze(1),
    "unflatten": lambda x: x.unflatten(2, (2, 2)),
    "flatten": lambda x: x.flatten(1),
    "alias": lambda x: torch.ops.aten.alias(x),
    "unsafe_view": lambda x: torch.ops.aten._unsafe_view(x, (24,)),
    "as_strided": lambda x: x.as_strided((3, 2), (4, 1), 2),
    "detach": lambda x: x.detach(),
    "chunk": lambda x: x.chunk(2, dim=-1)[1],
    "split": lambda x: x.split([1, 2], dim=1)[1],
    "unbind": lambda x: x.unbind(0)[1],
    "diagonal": lambda x: x.diagonal(0, 1, 2),
}


@pytest.mark.parametrize("name", VIEWS, ids=list(VIEWS))
def test_views_share_memory_and_match_cpu(name):
    fn = VIEWS[name]
    x = sample((2, 3, 4), torch.float32)
    d = x.to(DEV)
    want, got = fn(x), fn(d)
    assert got.untyped_storage().data_ptr() == d.untyped_storage().data_ptr()
    assert got.storage_offset() == want.storage_offset() and got.stride() == want.stride()
    assert_same(got, want)


def test_writes_through_views_reach_the_base():
    x = sample((4, 6), torch.float32)
    d = x.to(DEV)
    for t in (x, d):
        t.t()[1:3].mul_(2)
        t[:, 0].fill_(7)
        t.view(24)[::5].zero_()
    assert torch.equal(d.cpu(), x)


def test_set_shares_the_storage():
    a = torch.arange(6.0).to(DEV)
    b = torch.empty(0, device=DEV).set_(a.untyped_storage(), 2, (2, 2), (2, 1))
    assert torch.equal(b.cpu(), torch.tensor([[2.0, 3.0], [4.0, 5.0]]))
    a.fill_(1)
    assert torch.equal(b.cpu(), torch.ones(2, 2))


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_contiguous_clone_and_dtype_conversion(dtype):
    x = sample((3, 5), torch.float32)
    d = x.to(DEV)
    for want, got in ((x.t().contiguous(), d.t().contiguous()),
                      (x.t().clone(), d.t().clone()),
                      (x.t().to(dtype), d.t().to(dtype)),
                      (x.to(dtype).to(torch.float32), d.to(dtype).to(torch.float32)),
                      (x.to(torch.int64), d.to(torch.int64))):
        assert_same(got, want)
    c = d.t().contiguous()
    assert c.is_contiguous() and c.data_ptr() != d.data_ptr()
    assert d.contiguous() is d  # already contiguous: no copy, as on CPU
