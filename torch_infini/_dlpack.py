"""DLPack for infini tensors: ``torch.from_dlpack``, ``__dlpack__`` and
``__dlpack_device__``, sharing memory.

PyTorch exports a PrivateUse1 tensor as DLPack's extension device
(``kDLExtDev``) and imports such a capsule back onto the PrivateUse1 device,
in C++. Only ``Tensor.__dlpack_device__`` (Python) recognises the backend
by the literal name ``privateuse1``, which our rename to ``infini`` hides,
so it raises "Unknown device type infini for Dlpack", and
``torch.from_dlpack(x)`` with it. This module answers for infini tensors
where PyTorch's own method cannot, and leaves every other answer to it (a
PyTorch that knows the renamed backend answers first).
"""

from __future__ import annotations

import enum
import functools

import torch


def _device_of_infini(tensor: torch.Tensor) -> tuple[enum.IntEnum, int]:
    from torch.utils.dlpack import DLDeviceType

    index = tensor.device.index
    return DLDeviceType.kDLExtDev, 0 if index is None else index


def install() -> None:
    """Makes ``Tensor.__dlpack_device__`` answer for infini tensors (once)."""
    original = torch.Tensor.__dlpack_device__
    if getattr(original, "_torch_infini", False):
        return

    @functools.wraps(original)
    def __dlpack_device__(self: torch.Tensor) -> tuple[enum.IntEnum, int]:
        try:
            return original(self)
        except ValueError:
            if self.device.type != torch._C._get_privateuse1_backend_name():
                raise
            return _device_of_infini(self)

    __dlpack_device__._torch_infini = True  # type: ignore[attr-defined]
    torch.Tensor.__dlpack_device__ = __dlpack_device__  # type: ignore[method-assign]
