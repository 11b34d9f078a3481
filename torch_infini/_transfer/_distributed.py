"""torch.distributed under the switch: ``"nccl"`` is infini's c10d backend.

* ``init_process_group`` and ``new_group``: ``backend="nccl"`` becomes
  ``"infini"``; in a per-device string (``"cpu:gloo,cuda:nccl"``) the device
  ``cuda`` becomes ``infini`` and the backend ``nccl`` becomes ``infini``;
  ``device_id=torch.device("cuda", r)`` becomes infini's;
* ``init_device_mesh("cuda", ...)`` and ``DeviceMesh("cuda", ...)`` make
  infini meshes (FSDP2's ``fully_shard`` and DTensor take the mesh's device);
* ``is_nccl_available()`` says whether the infini backend is.

``get_backend()`` still answers ``"infini"``: the group is infini's.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

import torch

from ._map import TARGET, names_cuda, replace, to_infini

#: The backend CUDA programs name, and what it becomes.
CUDA_BACKEND = "nccl"


def map_backend(backend: Any) -> Any:
    """``"nccl"`` -> ``"infini"``; ``"cpu:gloo,cuda:nccl"`` -> ``"cpu:gloo,infini:infini"``;
    anything else unchanged."""
    if not isinstance(backend, str):
        return backend
    if ":" not in backend:
        return TARGET if backend.lower() == CUDA_BACKEND else backend
    pairs = []
    for pair in backend.split(","):
        device, _, name = pair.partition(":")
        device = TARGET if names_cuda(device.strip()) else device
        name = TARGET if name.strip().lower() == CUDA_BACKEND else name
        pairs.append(f"{device}:{name}")
    return ",".join(pairs)


def _mapping(fn: Callable, backend: str | None = None, device: str | None = None) -> Callable:
    """``fn`` with its ``backend`` and ``device`` parameters (by these names,
    positional or keyword) mapped."""
    signature = inspect.signature(fn)

    @functools.wraps(fn)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        bound = signature.bind_partial(*args, **kwargs)
        if backend is not None and backend in bound.arguments:
            bound.arguments[backend] = map_backend(bound.arguments[backend])
        if device is not None and device in bound.arguments:
            bound.arguments[device] = to_infini(bound.arguments[device])
        return fn(*bound.args, **bound.kwargs)

    return mapped


def install() -> None:
    """Make the changes of the module docstring (nothing where PyTorch has no torch.distributed)."""
    dist = torch.distributed
    if not dist.is_available():
        return
    import torch.distributed.distributed_c10d as c10d
    import torch.distributed.device_mesh as device_mesh

    area = "torch.distributed"
    for name in ("init_process_group", "new_group"):
        new = _mapping(getattr(c10d, name), backend="backend", device="device_id")
        replace(c10d, name, new, f"torch.distributed.{name}",
                "backend 'nccl' and device 'cuda' become infini's", area)
        setattr(dist, name, new)
    mesh = _mapping(device_mesh.init_device_mesh, device="device_type")
    replace(device_mesh, "init_device_mesh", mesh, "torch.distributed.device_mesh.init_device_mesh",
            "device_type 'cuda' becomes infini", area)
    if getattr(dist, "init_device_mesh", None) is not None:
        dist.init_device_mesh = mesh
    init = device_mesh.DeviceMesh.__init__
    replace(device_mesh.DeviceMesh, "__init__", _mapping(init, device="device_type"),
            "torch.distributed.device_mesh.DeviceMesh", "device_type 'cuda' becomes infini", area)

    from .. import distributed as infini_distributed

    available = infini_distributed.is_available
    replace(c10d, "is_nccl_available", available, "torch.distributed.is_nccl_available",
            "whether the infini backend ('nccl' under the switch) is available", area)
    dist.is_nccl_available = available
