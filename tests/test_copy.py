"""Copies to, from and within infini, with the CPU copy as the oracle."""

from __future__ import annotations

import pytest
import torch

from infini_testing import sample

DTYPES = [
    torch.float32, torch.float16, torch.bfloat16, torch.float64,
    torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool,
]
IDS = [str(d).replace("torch.", "") for d in DTYPES]




def assert_equal(actual: torch.Tensor, expected: torch.Tensor) -> None:
    assert actual.device.type == "cpu"
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)


# Non-contiguous views of a (6, 8) tensor: name -> view.
VIEWS = {
    "contiguous": lambda t: t,
    "transposed": lambda t: t.t(),
    "step_slice": lambda t: t[::2, 1::3],
    "offset": lambda t: t[2:, 3:],
    "offset_row": lambda t: t[3],
    "expanded_col": lambda t: t[:, :1].expand(6, 5),
}
# Views that can be written to (no two elements share memory).
WRITABLE = [name for name in VIEWS if name != "expanded_col"]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("shape", [(), (1,), (37,), (6, 8), (2, 3, 4)], ids=str)
def test_round_trip(shape, dtype):
    cpu = sample(shape, dtype)
    dev = cpu.to("infini")
    assert dev.device == torch.device("infini:0")
    assert dev.dtype == dtype
    assert dev.shape == cpu.shape
    assert dev.stride() == cpu.stride()
    assert_equal(dev.cpu(), cpu)
    assert_equal(dev.to("cpu"), cpu)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("view", list(VIEWS), ids=list(VIEWS))
def test_non_contiguous_cpu_source(view, dtype):
    cpu = VIEWS[view](sample((6, 8), dtype))
    dev = cpu.to("infini")
    assert dev.shape == cpu.shape
    assert_equal(dev.cpu(), cpu.contiguous())


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("view", WRITABLE, ids=WRITABLE)
def test_non_contiguous_device_destination(view, dtype):
    """copy_ from CPU into a view of a device tensor writes only that view."""
    fill = sample((6, 8), dtype).flip(0)
    dev_base = fill.to("infini")
    cpu_base = fill.clone()
    dst_view = VIEWS[view](dev_base)
    src = sample(tuple(dst_view.shape), dtype)
    returned = dst_view.copy_(src)
    assert returned is dst_view
    VIEWS[view](cpu_base).copy_(src)
    assert_equal(dev_base.cpu(), cpu_base)
    assert_equal(dst_view.cpu(), src)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("view", list(VIEWS), ids=list(VIEWS))
def test_non_contiguous_device_source(view, dtype):
    cpu = sample((6, 8), dtype)
    dev_view = VIEWS[view](cpu.to("infini"))
    assert_equal(dev_view.cpu(), VIEWS[view](cpu).contiguous())


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("view", WRITABLE, ids=WRITABLE)
def test_device_to_non_contiguous_cpu_destination(view, dtype):
    cpu_base = sample((6, 8), dtype).flip(1).contiguous()
    expected = cpu_base.clone()
    dst = VIEWS[view](cpu_base)
    src_cpu = sample(tuple(dst.shape), dtype)
    dst.copy_(src_cpu.to("infini"))
    VIEWS[view](expected).copy_(src_cpu)
    assert_equal(cpu_base, expected)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_strided_both_sides(dtype):
    src_cpu = sample((6, 8), dtype)
    dev_src = src_cpu.to("infini").t()[1::2]          # (4, 6), strided with offset
    dev_dst_base = torch.zeros(8, 10, dtype=dtype).to("infini")
    dev_dst = dev_dst_base[2:6, 1:7]
    dev_dst.copy_(dev_src)
    expected = torch.zeros(8, 10, dtype=dtype)
    expected[2:6, 1:7] = src_cpu.t()[1::2]
    assert_equal(dev_dst_base.cpu(), expected)


CONVERSIONS = [
    (torch.float32, torch.float16), (torch.float16, torch.float32), (torch.float32, torch.bfloat16),
    (torch.float64, torch.float32), (torch.float32, torch.int32), (torch.int64, torch.float64),
    (torch.int32, torch.int8), (torch.uint8, torch.int64), (torch.float32, torch.bool),
    (torch.bool, torch.float16), (torch.int16, torch.uint8),
]
CONV_IDS = [f"{a}-{b}".replace("torch.", "") for a, b in CONVERSIONS]


def _conversion_source(dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.tensor([[-3.75, -1.0, 0.0, 0.1], [1.5, 2.0, 100.25, 7.0]], dtype=dtype)
    return sample((2, 4), dtype)


@pytest.mark.parametrize("src_dtype,dst_dtype", CONVERSIONS, ids=CONV_IDS)
def test_converting_copy_host_to_device(src_dtype, dst_dtype):
    src = _conversion_source(src_dtype)
    expected = torch.empty(2, 4, dtype=dst_dtype).copy_(src)
    dst = torch.empty(2, 4, dtype=dst_dtype, device="infini")
    dst.copy_(src)
    assert_equal(dst.cpu(), expected)
    # Into a transposed destination too.
    dst_t = torch.empty(4, 2, dtype=dst_dtype, device="infini").t()
    dst_t.copy_(src)
    assert_equal(dst_t.cpu(), expected)


@pytest.mark.parametrize("src_dtype,dst_dtype", CONVERSIONS, ids=CONV_IDS)
def test_converting_copy_device_to_host(src_dtype, dst_dtype):
    src = _conversion_source(src_dtype)
    expected = torch.empty(2, 4, dtype=dst_dtype).copy_(src)
    dst = torch.empty(2, 4, dtype=dst_dtype)
    dst.copy_(src.to("infini"))
    assert_equal(dst, expected)
    # Into a transposed CPU destination, from a transposed device source.
    dst_t = torch.empty(4, 2, dtype=dst_dtype).t()
    dst_t.copy_(src.t().contiguous().to("infini").t())
    assert_equal(dst_t, expected)


@pytest.mark.parametrize("src_dtype,dst_dtype", CONVERSIONS, ids=CONV_IDS)
def test_converting_copy_on_device(src_dtype, dst_dtype):
    src = _conversion_source(src_dtype)
    expected = torch.empty(2, 4, dtype=dst_dtype).copy_(src)
    dev_src = src.to("infini")
    dst = torch.empty(2, 4, dtype=dst_dtype, device="infini")
    dst.copy_(dev_src)
    assert_equal(dst.cpu(), expected)
    # .to(dtype) on the device, and .to(device, dtype) from the host.
    assert_equal(dev_src.to(dst_dtype).cpu(), src.to(dst_dtype))
    assert dev_src.to(dst_dtype).device.type == "infini"
    assert_equal(src.to("infini", dst_dtype).cpu(), src.to(dst_dtype))


def test_float32_into_float16_and_back():
    src = torch.tensor([0.1, 1.0 / 3.0, 65504.0, -2.5e-5, 1234.5678])
    half = torch.empty(5, dtype=torch.float16, device="infini")
    half.copy_(src)
    back = torch.empty(5, dtype=torch.float32)
    back.copy_(half)
    assert_equal(back, src.half().float())


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_device_to_device_contiguous(dtype):
    cpu = sample((5, 7), dtype)
    src = cpu.to("infini")
    dst = torch.empty(5, 7, dtype=dtype, device="infini")
    assert dst.copy_(src) is dst
    assert dst.data_ptr() != src.data_ptr()
    assert_equal(dst.cpu(), cpu)
    # The copy is a copy: changing the source later does not change it.
    src.copy_(torch.zeros_like(cpu))
    assert_equal(dst.cpu(), cpu)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("view", list(VIEWS), ids=list(VIEWS))
def test_device_to_device_strided_source(view, dtype):
    cpu = sample((6, 8), dtype)
    src = VIEWS[view](cpu.to("infini"))
    dst = torch.empty(tuple(src.shape), dtype=dtype, device="infini")
    dst.copy_(src)
    assert_equal(dst.cpu(), VIEWS[view](cpu).contiguous())


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_device_to_device_strided_destination(dtype):
    cpu = sample((4, 6), dtype)
    base = torch.zeros(6, 8, dtype=dtype).to("infini")
    base.t()[1:7, 2:6].copy_(cpu.t().to("infini"))
    expected = torch.zeros(6, 8, dtype=dtype)
    expected.t()[1:7, 2:6].copy_(cpu.t())
    assert_equal(base.cpu(), expected)


def test_copy_to_itself_is_a_no_op():
    cpu = sample((3, 3), torch.float32)
    dev = cpu.to("infini")
    dev.copy_(dev)
    assert_equal(dev.cpu(), cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool], ids=str)
def test_to_and_cpu(dtype):
    cpu = sample((3, 4), dtype)
    dev = cpu.to("infini")
    assert dev.is_infini and dev.device.index == 0
    assert dev.to("infini") is dev           # already there: no copy, like CUDA
    assert cpu.to("cpu") is cpu
    assert_equal(cpu.to(torch.device("infini:0")).cpu(), cpu)
    assert_equal(cpu.to("infini", non_blocking=True).cpu(), cpu)
    host = dev.cpu()
    assert host.data_ptr() != cpu.data_ptr()
    assert_equal(host, cpu)
    assert_equal(torch.tensor(cpu.tolist(), dtype=dtype, device="infini").cpu(), cpu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool], ids=str)
def test_non_blocking_copies(dtype):
    cpu = sample((33, 7), dtype)
    pinned = cpu.pin_memory()
    assert pinned.is_pinned()
    dev = pinned.to("infini", non_blocking=True)
    host = dev.to("cpu", non_blocking=True)
    assert host.is_pinned()              # as from CUDA: the destination is pinned
    torch.infini.synchronize()
    assert_equal(host, cpu)
    # Pageable source and destination with non_blocking=True are still correct.
    assert_equal(cpu.to("infini", non_blocking=True).cpu(), cpu)
    out = torch.empty(33, 7, dtype=dtype)
    out.copy_(dev, non_blocking=True)
    torch.infini.synchronize()
    assert_equal(out, cpu)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("view", ["contiguous", "transposed", "step_slice", "offset"])
def test_clone(view, dtype):
    cpu = VIEWS[view](sample((6, 8), dtype))
    dev = VIEWS[view](sample((6, 8), dtype).to("infini"))
    cloned = dev.clone()
    ref = cpu.clone()
    assert cloned.device.type == "infini"
    assert cloned.data_ptr() != dev.data_ptr()
    assert cloned.stride() == ref.stride()
    assert cloned.storage_offset() == ref.storage_offset()
    assert_equal(cloned.cpu(), ref)


@pytest.mark.parametrize("where", ["h2d", "d2d", "d2h"])
@pytest.mark.parametrize("dst_shape,src_shape", [((3, 4), (4,)), ((3, 4), (3, 1)), ((2, 3, 4), (1, 4)), ((3, 4), ())],
                         ids=["row", "col", "3d", "scalar"])
def test_broadcasting_copy(where, dst_shape, src_shape):
    src = sample(src_shape, torch.float32) + 1.5
    expected = torch.empty(dst_shape).copy_(src)
    if where == "h2d":
        dst = torch.empty(dst_shape, device="infini")
        dst.copy_(src)
        result = dst.cpu()
    elif where == "d2d":
        dst = torch.empty(dst_shape, device="infini")
        dst.copy_(src.to("infini"))
        result = dst.cpu()
    else:
        result = torch.empty(dst_shape)
        result.copy_(src.to("infini"))
    assert_equal(result, expected)


def test_broadcasting_copy_bad_shape_raises_like_cpu():
    with pytest.raises(RuntimeError):
        torch.empty(3, 4).copy_(torch.ones(3))
    with pytest.raises(RuntimeError):
        torch.empty(3, 4, device="infini").copy_(torch.ones(3))
    with pytest.raises(RuntimeError):
        torch.empty(3, 4, device="infini").copy_(torch.ones(3, device="infini"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int8, torch.bool], ids=str)
@pytest.mark.parametrize("shape", [(0,), (3, 0), (0, 2, 5)], ids=str)
def test_zero_size_copies(shape, dtype):
    cpu = torch.empty(shape, dtype=dtype)
    dev = cpu.to("infini")
    assert dev.shape == cpu.shape and dev.device.type == "infini"
    assert dev.cpu().shape == cpu.shape
    dst = torch.empty(shape, dtype=dtype, device="infini")
    assert dst.copy_(dev) is dst
    assert dst.copy_(cpu) is dst
    host = torch.empty(shape, dtype=torch.float64)
    host.copy_(dev)
    assert host.shape == cpu.shape
    assert dev.clone().shape == cpu.shape


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128, torch.complex32])
def test_complex_copies_in_every_direction(dtype):
    z = torch.randn(3, 4, dtype=torch.complex64).to(dtype)
    d = z.to("infini")
    torch.testing.assert_close(d.cpu(), z, rtol=0, atol=0)
    torch.testing.assert_close(d.t().contiguous().cpu(), z.t().contiguous(), rtol=0, atol=0)
    torch.testing.assert_close(d.conj().cpu(), z.conj(), rtol=0, atol=0)
    torch.testing.assert_close(torch.neg(d.conj()).cpu(), torch.neg(z.conj()), rtol=0, atol=0)
    # conjugate and negative views written into and read from
    e = torch.empty_like(d)
    e.conj().copy_(d)
    torch.testing.assert_close(e.cpu(), z.conj(), rtol=0, atol=0)
    torch.testing.assert_close(d.real.cpu(), z.real, rtol=0, atol=0)


def test_copy_after_many_queued_ops_is_ordered():
    """A device->host copy waits for the queued work before it (stream order)."""
    cpu = torch.arange(4096, dtype=torch.float32)
    dev = cpu.to("infini")
    expected = cpu.clone()
    for _ in range(20):
        dev = dev + dev
        expected = expected + expected
    assert_equal(dev.cpu(), expected)


def _drain_async_errors() -> None:
    """An asynchronous error is reported once by the next synchronize; take it
    here so that it is not blamed on a later test."""
    try:
        torch.infini.synchronize()
    except RuntimeError:
        pass


@pytest.mark.parametrize("source", ["cpu", "infini"])
def test_copy_into_internally_overlapping_device_destination_raises_at_call(source):
    dst = torch.zeros(1).to("infini").expand(3)
    src = torch.arange(3.0).to(source)
    try:
        with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
            dst.copy_(src)
    finally:
        _drain_async_errors()


def test_partially_overlapping_device_copy_raises_like_cpu():
    t = torch.arange(6.0).to("infini")
    try:
        with pytest.raises(RuntimeError, match="refer to a single memory location"):
            t[1:].copy_(t[:-1])
    finally:
        _drain_async_errors()
