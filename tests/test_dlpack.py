"""DLPack on infini: ``torch.from_dlpack``, ``__dlpack__`` and
``__dlpack_device__`` share memory, both ways, for every dtype DLPack has
and for strided views; the oracle is the same round trip on the CPU."""

from __future__ import annotations

import pytest
import torch
from torch.utils.dlpack import DLDeviceType, from_dlpack, to_dlpack

from infini_testing import DEV, sample

DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16,
          torch.uint32, torch.uint64, torch.float16, torch.bfloat16, torch.float32, torch.float64,
          torch.complex64, torch.complex128]


def test_dlpack_device_is_the_extension_device():
    assert torch.ones(2, device=DEV).__dlpack_device__() == (DLDeviceType.kDLExtDev, 0)
    assert torch.ones(2).__dlpack_device__() == (DLDeviceType.kDLCPU, 0)  # the others: PyTorch's answer


def test_from_dlpack_shares_memory_both_ways():
    x = sample((2, 3), torch.float32).to(DEV)
    y = torch.from_dlpack(x)
    assert y.device == x.device and y.data_ptr() == x.data_ptr()
    y[0, 0] = 42.0
    x[1, 2] = -7.0
    want = sample((2, 3), torch.float32)
    want[0, 0], want[1, 2] = 42.0, -7.0
    assert torch.equal(x.cpu(), want) and torch.equal(y.cpu(), want)


def values(shape, dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_complex:
        real = sample(shape, torch.float64)
        return torch.complex(real, -2 * real).to(dtype)
    return sample(shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=[str(d).removeprefix("torch.") for d in DTYPES])
def test_round_trip_every_dtype(dtype):
    cpu = values((4, 5), dtype)
    x = cpu.to(DEV)
    for y in (torch.from_dlpack(x), from_dlpack(to_dlpack(x)), torch.from_dlpack(x.__dlpack__())):
        assert y.dtype == dtype and y.device == x.device and y.data_ptr() == x.data_ptr()
        assert torch.equal(y.cpu(), torch.from_dlpack(cpu))


def test_round_trip_a_strided_view():
    cpu = sample((6, 8), torch.float32)[1::2, ::3].t()
    x = sample((6, 8), torch.float32).to(DEV)[1::2, ::3].t()
    y = torch.from_dlpack(x)
    want = torch.from_dlpack(cpu)
    assert y.stride() == want.stride() and y.storage_offset() == want.storage_offset()
    assert y.data_ptr() == x.data_ptr() and torch.equal(y.cpu(), want)


def test_a_conjugated_view_is_refused_as_on_cpu():
    z = torch.ones(2, dtype=torch.complex64)
    with pytest.raises(BufferError) as cpu:
        torch.from_dlpack(z.conj())
    with pytest.raises(BufferError, match=str(cpu.value)):
        torch.from_dlpack(z.to(DEV).conj())


def test_a_consumer_without_the_device_refuses_it():
    numpy = pytest.importorskip("numpy")
    with pytest.raises((RuntimeError, BufferError, ValueError, TypeError)):
        numpy.from_dlpack(torch.ones(2, device=DEV))
