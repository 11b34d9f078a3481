"""Whether this process can run the ATen-backed InfiniOps it was built with.

InfiniOps built ``WITH_TORCH=ON`` has, for each backend, ATen-backed
implementations (index 8) that hand PyTorch's kernels InfiniRT's device
memory as tensors of that device's PyTorch (InfiniOps' ``TorchDeviceName``:
``cuda`` on NVIDIA, MetaX, Iluvatar and Hygon, ``mlu`` on Cambricon, ``npu``
on Ascend, ``musa`` on Moore; ``cpu`` on InfiniRT's CPU backend). So on an
accelerator they need that device's PyTorch in the same process: a CUDA
build of PyTorch on NVIDIA, the vendor's build on the other CUDA-family
devices. On Cambricon, Ascend and Moore that PyTorch is a plugin
(``torch_mlu``, ``torch_npu``, ``torch_musa``) that registers its device as
PyTorch's PrivateUse1 backend, which torch-infini holds as ``infini``: the
two cannot share a process, so there an ATen-backed InfiniOps cannot serve
torch-infini at all.

:func:`refusal` decides, from the build metadata (``infini_ops_aten_backed``:
the backends libinfiniops has index-8 implementations for) and the running
PyTorch, whether the provider must refuse a backend; :func:`install` hands
the refusals to the provider selection at import, before any device is used.
Pure: tested against stub metadata (tests/test_aten_backed.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ProcessTorch", "torch_device", "needed_pytorch", "refusal", "refusals", "install"]

#: InfiniOps' TorchDeviceName, for a build whose support matrix lacks it.
_TORCH_DEVICES = {"cpu": "cpu", "nvidia": "cuda", "ascend": "npu", "cambricon": "mlu", "metax": "cuda",
                  "moore": "musa", "iluvatar": "cuda", "hygon": "cuda"}
#: The PyTorch plugins that bring the devices PyTorch itself does not have.
_PLUGINS = {"mlu": "torch_mlu", "npu": "torch_npu", "musa": "torch_musa"}


@dataclass(frozen=True)
class ProcessTorch:
    """What the running PyTorch brings: its version, CUDA and HIP versions
    (None in a build without them), and the name PrivateUse1 has."""

    version: str
    cuda: str | None
    hip: str | None
    privateuse1: str

    @staticmethod
    def current() -> "ProcessTorch":
        """The running PyTorch's."""
        import torch

        return ProcessTorch(version=torch.__version__, cuda=torch.version.cuda,
                            hip=getattr(torch.version, "hip", None),
                            privateuse1=torch._C._get_privateuse1_backend_name())


def torch_device(backend: str) -> str:
    """The PyTorch device `backend`'s ATen-backed implementations run ATen
    on (``"cuda"`` for ``"nvidia"``), from the support matrix of the current
    pin (InfiniOps' ``src/torch/device_.h``)."""
    from . import backend_support

    devices = backend_support.load_matrix().get("torch_devices") or _TORCH_DEVICES
    return devices.get(backend, _TORCH_DEVICES.get(backend, backend))


def needed_pytorch(backend: str) -> str:
    """The PyTorch the process needs for `backend`'s ATen-backed
    implementations, in words."""
    device = torch_device(backend)
    if device == "cpu":
        return "any PyTorch (its CPU kernels)"
    if device == "cuda":
        return ("a CUDA build of PyTorch (torch.version.cuda)" if backend == "nvidia" else
                f"{backend}'s build of PyTorch for its 'cuda' device")
    return (f"the {_PLUGINS.get(device, device)} plugin, which registers '{device}' as PyTorch's PrivateUse1 "
            "backend, as torch-infini does for 'infini': the two cannot share one process")


def _has_device_pytorch(backend: str, running: ProcessTorch) -> bool:
    device = torch_device(backend)
    if device == "cpu":
        return True
    if device == "cuda":
        return running.cuda is not None or (backend != "nvidia" and running.hip is not None)
    # A PrivateUse1 plugin: only if the process's PrivateUse1 were that
    # device, which it is not while torch-infini holds it.
    return running.privateuse1 == device


def refusal(backend: str, metadata: Mapping[str, Any], running: ProcessTorch) -> str | None:
    """Why the provider must refuse InfiniRT backend `backend`: its InfiniOps
    is ATen-backed there (the build metadata says so) and `running` lacks
    the PyTorch those implementations run on. None when it can run."""
    if (backend == "cpu" or backend not in metadata.get("infini_ops_aten_backed", [])
            or _has_device_pytorch(backend, running)):
        return None  # (InfiniRT's CPU backend runs PyTorch's CPU kernels: every PyTorch has them)
    device = torch_device(backend)
    if device == "cuda":
        missing = (f"this process's PyTorch {running.version} has no CUDA (torch.version.cuda is None)"
                   if backend == "nvidia" else
                   f"this process's PyTorch {running.version} has no 'cuda' device (torch.version.cuda and "
                   "torch.version.hip are None)")
        fix = (f"install {needed_pytorch(backend)}, the one InfiniOps was built against, and rebuild "
               "torch_infini with it, or build InfiniOps WITH_TORCH=OFF (native kernels only)")
    else:
        missing = f"their PyTorch is {needed_pytorch(backend)}"
        fix = "build InfiniOps WITH_TORCH=OFF (native kernels only)"
    return (f"InfiniRT backend '{backend}' is refused: this torch_infini's InfiniOps is ATen-backed there (built "
            f"WITH_TORCH=ON: its ATen-backed implementations, index 8, run PyTorch's '{device}' kernels on "
            f"InfiniRT's memory), and {missing}. To use {backend}, {fix}; or run on InfiniRT's CPU backend "
            "(TORCH_INFINI_RT_BACKEND=cpu) or the host runtime (TORCH_INFINI_PROVIDER=host)")


def refusals(metadata: Mapping[str, Any], running: ProcessTorch) -> dict[str, str]:
    """:func:`refusal` for every InfiniRT backend the build has, where one applies."""
    found = {}
    for backend in metadata.get("infini_rt_backends", []):
        why = refusal(backend, metadata, running)
        if why:
            found[backend] = why
    return found


def install(metadata: Mapping[str, Any]) -> dict[str, str]:
    """Hands the refusals for the running PyTorch to the provider selection
    (before any device is used: the provider is selected once, at first
    use). Returns them."""
    from . import _C

    found = refusals(metadata, ProcessTorch.current()) if metadata.get("infini_stack") else {}
    for backend, why in found.items():
        _C._refuse_backend(backend, why)
    return found
