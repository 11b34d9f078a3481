"""torch.multiprocessing and infini tensors: sharing is refused, clearly.

CUDA tensors travel between processes as IPC handles to the same device
memory. Infini device memory has no such handle: the built-in host runtime's
memory is private to its process and InfiniRT has no IPC API. Without this
module, pickling an infini tensor for another process fails with PyTorch's
``_share_fd_: only available on CPU``; with it, with a message that says
what to do instead.
"""

from __future__ import annotations

from multiprocessing.reduction import ForkingPickler

import torch

__all__ = ["SHARING_REFUSAL"]

SHARING_REFUSAL = (
    "torch.multiprocessing cannot share infini tensors between processes: infini device "
    "memory belongs to the process that allocated it (the host runtime's memory is private "
    "to it, and InfiniRT has no IPC handles). Send a CPU copy instead (tensor.cpu(), and "
    ".to('infini') in the receiving process), or exchange tensors with torch.distributed "
    "(backend 'infini')."
)


def _is_infini(obj) -> bool:
    if isinstance(obj, torch.storage.TypedStorage):
        obj = obj._untyped_storage  # its .device warns that TypedStorage is deprecated
    device = getattr(obj, "device", None)
    return isinstance(device, torch.device) and device.type == "infini"


def _refusing(reduce):
    def reduce_unless_infini(obj):
        if _is_infini(obj):
            raise RuntimeError(SHARING_REFUSAL)
        return reduce(obj)

    reduce_unless_infini._torch_infini_wraps = reduce  # type: ignore[attr-defined]
    return reduce_unless_infini


def _register() -> None:
    """Wraps torch's tensor and storage reducers (registered by
    ``torch.multiprocessing``) for every type they serve."""
    from torch.multiprocessing import reductions

    torch_reducers = (reductions.reduce_tensor, reductions.reduce_storage,
                      reductions.reduce_typed_storage, reductions.reduce_typed_storage_child)
    for cls, reduce in list(ForkingPickler._extra_reducers.items()):
        if reduce in torch_reducers:
            ForkingPickler.register(cls, _refusing(reduce))
