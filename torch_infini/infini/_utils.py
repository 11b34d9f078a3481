"""Device-index handling shared by the torch.infini submodules."""

from __future__ import annotations

from typing import Any, Union

import torch

from .. import _C

Device = Union[int, str, torch.device, None]


def _other_device_type(device: torch.device) -> torch.device:
    """A device of another type than infini, as torch.infini takes it: the
    CUDA-to-infini switch (torch_infini.transfer_to_infini) replaces this so
    that ``torch.cuda.set_device("cuda:1")`` and the like name infini:1;
    otherwise the device is returned as it is (and refused by the caller)."""
    return device


def _get_device_index(device: Device, optional: bool = True) -> int:
    """The device index of ``device`` (an int, ``"infini:N"`` or a torch.device).

    ``None`` (and a device without an index) means the current device when
    ``optional`` is true, as in ``torch.cuda``.
    """
    if isinstance(device, str):
        device = torch.device(device)
    if isinstance(device, torch.device):
        if device.type != "infini":
            device = _other_device_type(device)
        if device.type != "infini":
            raise ValueError(f"Expected an infini device, but got: {device}")
        index = device.index
    elif device is None:
        index = None
    elif isinstance(device, int) and not isinstance(device, bool):
        index = device
    else:
        raise ValueError(f"Expected an infini device index, torch.device or str, but got: {device!r}")
    if index is None:
        if not optional:
            raise ValueError(f"Expected an infini device with a specified index or an integer, but got: {device}")
        return _C._current_device()
    return index


def _resolve_index(device: "Device") -> int:
    """The index ``device`` names, where ``None`` and negative integers mean
    the current device (as torch.cuda's stream and synchronize functions)."""
    index = _get_device_index(device, optional=True)
    if index < 0:
        index = _C._current_device()
    return _check_index(index)


def _check_index(index: int) -> int:
    count = _C._device_count()
    if index < 0 or index >= count:
        raise RuntimeError(
            f"Invalid device index {index}: infini has {count} device(s), valid indices are 0..{count - 1}"
        )
    return index


def _device_of_object(obj: Any) -> int:
    if isinstance(obj, torch.Tensor) and obj.device.type == "infini":
        return obj.get_device()
    return -1
