"""Device management: the torch.cuda functions of the same names."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import torch

from .. import _C
from ._utils import Device, _check_index, _device_of_object, _get_device_index, _resolve_index


def is_available() -> bool:
    r"""Return a bool indicating if an infini device is currently available."""
    return _C._device_count() > 0


def device_count() -> int:
    r"""Return the number of infini devices available."""
    return _C._device_count()


def is_initialized() -> bool:
    r"""Return whether the infini runtime has been initialized in this process."""
    return _C._is_initialized()


def init() -> None:
    r"""Initialize the infini runtime (it also initializes lazily on first use).

    Raises RuntimeError, with the reason, when no device can be used."""
    _C._init()


def _lazy_init() -> None:
    r"""Initialize the infini runtime if it is not yet (``torch.cuda._lazy_init``).

    PyTorch's device-generic code (``torch::utils::device_lazy_init``: tensor
    factories, ``torch.Stream``, ``torch.accelerator``) calls it before it
    uses the device, and counts a PrivateUse1 module without it as never
    initialized: in PyTorch 2.11 ``torch.accelerator.synchronize()`` then
    returned without waiting."""
    _C._init()


def _is_in_bad_fork() -> bool:
    r"""Whether this process was forked after the infini runtime started (it
    then must not use the device; use the 'spawn' start method instead)."""
    return _C._is_in_bad_fork()


def current_device() -> int:
    r"""Return the index of the currently selected device."""
    return _C._current_device()


def set_device(device: Device) -> None:
    r"""Set the current device.

    Args:
        device (torch.device or int or str): selected device. This function is
            a no-op if this argument is negative.
    """
    index = _get_device_index(device)
    if index >= 0:
        _C._set_device(_check_index(index))


class device:
    r"""Context-manager that changes the selected device.

    Args:
        device (torch.device or int or str): device index to select. It's a
            no-op if this argument is a negative integer or ``None``.
    """

    def __init__(self, device: Any):
        self.idx = _get_device_index(device, optional=True) if device is not None else -1
        self.prev_idx = -1

    def __enter__(self) -> None:
        if self.idx < 0:
            return
        self.prev_idx = _C._current_device()
        if self.idx != self.prev_idx:
            _C._set_device(_check_index(self.idx))

    def __exit__(self, type: Any, value: Any, traceback: Any) -> bool:
        if self.idx >= 0 and self.prev_idx != self.idx:
            _C._set_device(self.prev_idx)
        return False


class device_of(device):
    r"""Context-manager that changes the current device to that of given object.

    You can use both tensors and storages as arguments. If a given object is
    not allocated on an infini device, this is a no-op.
    """

    def __init__(self, obj: Any):
        super().__init__(_device_of_object(obj))


def synchronize(device: Device = None) -> None:
    r"""Wait for all kernels in all streams on an infini device to complete.

    Args:
        device (torch.device or int, optional): device for which to
            synchronize. It uses the current device if ``device`` is ``None``.
    """
    # None is the common case, in a loop of small synchronous ops: the C++
    # side resolves -1 to the current device without Python's lookups.
    _C._synchronize(-1 if device is None else _resolve_index(device))


@dataclass(frozen=True)
class _InfiniDeviceProperties:
    r"""What :func:`get_device_properties` returns: the fields third-party code
    reads from ``torch.cuda.get_device_properties()``, with infini's values.

    ``major``/``minor`` are 0: an infini device has no CUDA compute capability,
    so code that gates features on it (``>= (8, 0)``) takes its portable path.
    ``multi_processor_count`` is the number of CPU cores where the device's
    kernels run on the host (the host runtime, InfiniRT's CPU backend) and 0
    where the provider does not report it. ``is_integrated`` is true where
    device memory is host memory.
    """

    name: str
    total_memory: int
    provider: str
    backend: str
    major: int = 0
    minor: int = 0
    multi_processor_count: int = 0
    is_integrated: bool = False

    def __repr__(self) -> str:
        return (
            f"_InfiniDeviceProperties(name='{self.name}', major={self.major}, minor={self.minor}, "
            f"total_memory={self.total_memory // (1024 * 1024)}MB, "
            f"multi_processor_count={self.multi_processor_count}, is_integrated={int(self.is_integrated)}, "
            f"provider='{self.provider}', backend='{self.backend}')"
        )


def _checked_property_index(device: Device) -> int:
    index = _get_device_index(device, optional=True)
    if index < 0 or index >= device_count():
        raise AssertionError("Invalid device id")
    return index


def _runs_on_host(info: dict) -> bool:
    return info["provider"] == "host" or info["backend"] == "cpu"


def get_device_properties(device: Device = None) -> _InfiniDeviceProperties:
    r"""Get the properties of a device.

    Args:
        device (torch.device or int or str, optional): device for which to
            return the properties. It uses the current device if ``None``.

    Returns:
        _InfiniDeviceProperties: the properties of the device (``name``,
        ``total_memory``, ``major``, ``minor``, ``multi_processor_count``,
        ``is_integrated``, and infini's ``provider`` and ``backend``)
    """
    index = _checked_property_index(device)
    info = _C._provider_info()
    _free, total = _C._mem_get_info(index)
    on_host = _runs_on_host(info)
    return _InfiniDeviceProperties(
        _C._device_name(index), int(total), info["provider"], info["backend"],
        multi_processor_count=(os.cpu_count() or 1) if on_host else 0, is_integrated=on_host)


def get_device_capability(device: Device = None) -> tuple[int, int]:
    r"""Get the compute capability of a device, as ``(major, minor)``.

    An infini device has no CUDA compute capability: this is ``(0, 0)`` on
    every provider, so that code comparing it with a CUDA architecture
    (``>= (8, 0)``) takes its portable path. What the device can do is in
    :func:`torch_infini.diagnostics` (capabilities) and
    ``python -m torch_infini --ops`` (operators).

    Args:
        device (torch.device or int or str, optional): device for which to
            return the device capability. It uses the current device if
            ``device`` is ``None``.
    """
    props = get_device_properties(device)
    return props.major, props.minor


def get_arch_list() -> list[str]:
    r"""Return the runtimes this build of torch_infini was compiled for:
    ``"host"`` (the built-in host runtime, always) and each InfiniRT backend
    compiled in (``"infini-cpu"``, ``"infini-nvidia"``, ...)."""
    from .._guard import load_metadata

    backends = load_metadata().get("infini_rt_backends", [])
    return ["host"] + [f"infini-{backend}" for backend in backends]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    r"""Return a bool indicating if the current infini device supports dtype bfloat16.

    True on the host runtime (every operator runs bfloat16 through ATen's CPU
    kernels); on the Infini stack, whether the InfiniOps kernels it was built
    with take bfloat16 (``python -m torch_infini --ops`` lists their dtypes).
    ``including_emulation`` is accepted for torch.cuda compatibility; infini
    has no emulated bfloat16.
    """
    if not is_available():
        return False
    if _C._provider_info()["provider"] == "host":
        return True
    return any("bfloat16" in row["dtypes"] for row in _C._op_support())


def get_device_name(device: Device = None) -> str:
    r"""Get the name of a device (the current device if ``device`` is ``None``)."""
    return get_device_properties(device).name
