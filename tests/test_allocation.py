"""Factories and resizing on infini: metadata equal to CPU's, contents kept by resize_."""

from __future__ import annotations

import pytest
import torch

from infini_testing import on_host
from infini_testing import sample as _sample

DTYPES = [
    torch.float32, torch.float16, torch.bfloat16, torch.float64,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool,
]
SHAPES = [(), (1,), (7,), (3, 4), (2, 3, 5), (0,), (3, 0), (2, 0, 4)]


def _ids(values):
    return [str(v) for v in values]




def assert_same_metadata(dev: torch.Tensor, cpu: torch.Tensor) -> None:
    assert dev.device.type == "infini"
    assert dev.shape == cpu.shape
    assert dev.stride() == cpu.stride()
    assert dev.dtype == cpu.dtype
    assert dev.storage_offset() == cpu.storage_offset()
    assert dev.nbytes == cpu.nbytes
    assert dev.element_size() == cpu.element_size()
    assert dev.is_contiguous() == cpu.is_contiguous()
    assert dev.untyped_storage().nbytes() == cpu.untyped_storage().nbytes()


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize("shape", SHAPES, ids=_ids(SHAPES))
def test_empty_matches_cpu(shape, dtype):
    dev = torch.empty(shape, dtype=dtype, device="infini")
    assert dev.device == torch.device("infini:0")
    assert_same_metadata(dev, torch.empty(shape, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
def test_empty_default_dtype_and_explicit_index(dtype):
    assert torch.empty(2, device="infini").dtype == torch.get_default_dtype()
    dev = torch.empty(2, 3, dtype=dtype, device=torch.device("infini", 0))
    assert dev.device == torch.device("infini:0")
    assert_same_metadata(dev, torch.empty(2, 3, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize(
    "size,stride",
    [((2, 3), (3, 1)), ((2, 3), (1, 2)), ((2, 3), (4, 1)), ((3, 4), (0, 1)), ((2, 3, 4), (1, 2, 6)),
     ((0, 3), (3, 1)), ((), ())],
    ids=["contig", "colmajor", "padded", "zero_stride", "3d_perm", "empty", "scalar"],
)
def test_empty_strided_matches_cpu(size, stride, dtype):
    dev = torch.empty_strided(size, stride, dtype=dtype, device="infini")
    assert_same_metadata(dev, torch.empty_strided(size, stride, dtype=dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
def test_empty_like_matches_cpu(dtype):
    cpu_src = torch.empty(3, 4, 5, dtype=dtype)
    dev_src = torch.empty(3, 4, 5, dtype=dtype, device="infini")
    # Contiguous, permuted (preserve_format keeps the permutation), sliced.
    for view in (lambda t: t, lambda t: t.permute(2, 0, 1), lambda t: t.transpose(0, 1), lambda t: t[:, ::2]):
        dev = torch.empty_like(view(dev_src))
        cpu = torch.empty_like(view(cpu_src))
        assert_same_metadata(dev, cpu)
    assert_same_metadata(torch.empty_like(dev_src, dtype=torch.int16), torch.empty_like(cpu_src, dtype=torch.int16))


def test_empty_like_from_cpu_to_infini():
    cpu = torch.empty(2, 5, dtype=torch.float16).t()
    dev = torch.empty_like(cpu, device="infini")
    assert_same_metadata(dev, torch.empty_like(cpu))


def test_channels_last_matches_cpu():
    dev = torch.empty(2, 3, 4, 5, device="infini", memory_format=torch.channels_last)
    assert_same_metadata(dev, torch.empty(2, 3, 4, 5, memory_format=torch.channels_last))
    assert dev.is_contiguous(memory_format=torch.channels_last)


def test_empty_negative_size_raises_like_cpu():
    with pytest.raises(RuntimeError):
        torch.empty(-1)
    with pytest.raises(RuntimeError, match="negative"):
        torch.empty(-1, device="infini")


def test_pin_memory_raises():
    with pytest.raises(RuntimeError, match="pinned"):
        torch.empty(2, device="infini", pin_memory=True)
    with pytest.raises(RuntimeError, match="pinned"):
        torch.empty_strided((2,), (1,), device="infini", pin_memory=True)


def test_compressed_sparse_layout_raises():
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.empty(2, 2, device="infini", layout=torch.sparse_csr)
    with pytest.raises((RuntimeError, NotImplementedError)):
        torch.empty_strided((2, 2), (2, 1), device="infini", layout=torch.sparse_csr)


def test_sparse_coo_empty_as_on_cpu():
    if not on_host():
        with pytest.raises(NotImplementedError, match="sparse tensors are served by the host runtime only"):
            torch.empty(2, 2, device="infini", layout=torch.sparse_coo) + 1
        return
    made = torch.empty(2, 2, device="infini", layout=torch.sparse_coo)
    want = torch.empty(2, 2, layout=torch.sparse_coo)
    assert made.is_sparse and made.device.type == "infini" and made.shape == want.shape and made._nnz() == 0
    with pytest.raises(NotImplementedError):  # CPU has no sparse empty_strided
        torch.empty_strided((2, 2), (2, 1), layout=torch.sparse_coo)
    with pytest.raises(NotImplementedError):
        torch.empty_strided((2, 2), (2, 1), device="infini", layout=torch.sparse_coo)


def test_distinct_allocations_do_not_alias():
    a = torch.empty(16, device="infini")
    b = torch.empty(16, device="infini")
    assert a.data_ptr() != b.data_ptr()
    a.copy_(torch.full((16,), 1.0))
    b.copy_(torch.full((16,), 2.0))
    assert torch.equal(a.cpu(), torch.full((16,), 1.0))
    assert torch.equal(b.cpu(), torch.full((16,), 2.0))


# --- resize_ -------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
@pytest.mark.parametrize("start,grown", [((6,), (50,)), ((2, 3), (4, 5)), ((0,), (3, 3)), ((1,), (1000,))],
                         ids=["1d", "2d", "from_empty", "large"])
def test_resize_grow_keeps_contents(start, grown, dtype):
    cpu = _sample(start, dtype)
    dev = cpu.to("infini")
    returned = dev.resize_(grown)
    assert returned is dev
    ref = cpu.clone().resize_(grown)
    assert dev.shape == ref.shape
    assert dev.stride() == ref.stride()
    assert dev.untyped_storage().nbytes() == ref.untyped_storage().nbytes()
    keep = cpu.numel()
    torch.testing.assert_close(dev.cpu().reshape(-1)[:keep], cpu.reshape(-1), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=_ids(DTYPES))
def test_resize_shrink_keeps_prefix_and_storage(dtype):
    cpu = _sample((4, 5), dtype)
    dev = cpu.to("infini")
    ptr = dev.data_ptr()
    dev.resize_(7)
    assert dev.shape == (7,)
    assert dev.stride() == (1,)
    assert dev.data_ptr() == ptr
    torch.testing.assert_close(dev.cpu(), cpu.reshape(-1)[:7], rtol=0, atol=0)
    dev.resize_(0)
    assert dev.shape == (0,)
    assert dev.untyped_storage().nbytes() == cpu.untyped_storage().nbytes()


def test_resize_view_with_storage_offset_grows_storage():
    cpu = torch.arange(10, dtype=torch.float32)
    base = cpu.to("infini")
    view = base[4:]
    view.resize_(20)
    ref = cpu.clone()[4:].resize_(20)
    assert view.storage_offset() == ref.storage_offset() == 4
    assert view.untyped_storage().nbytes() >= (4 + 20) * 4
    torch.testing.assert_close(view.cpu()[:6], cpu[4:], rtol=0, atol=0)


def test_resize_to_channels_last_matches_cpu():
    dev = torch.empty(2, 3, 4, 5, device="infini").resize_(2, 3, 4, 5, memory_format=torch.channels_last)
    cpu = torch.empty(2, 3, 4, 5).resize_(2, 3, 4, 5, memory_format=torch.channels_last)
    assert dev.stride() == cpu.stride()


def test_resize_non_contiguous_to_new_shape_is_contiguous_like_cpu():
    dev = torch.empty(3, 4, device="infini").t().resize_(5, 2)
    cpu = torch.empty(3, 4).t().resize_(5, 2)
    assert dev.stride() == cpu.stride() == (2, 1)


def test_resize_same_shape_keeps_strides_and_values_like_cpu():
    cpu = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    dev = torch.arange(12, dtype=torch.float32).reshape(3, 4).to("infini").t()
    cpu.resize_(4, 3)
    dev.resize_(4, 3)
    assert dev.stride() == cpu.stride()
    torch.testing.assert_close(dev.cpu(), cpu, rtol=0, atol=0)


def test_resize_negative_raises():
    with pytest.raises(RuntimeError, match="negative"):
        torch.empty(2, device="infini").resize_(-1)
