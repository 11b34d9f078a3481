"""torch.multiprocessing and infini tensors: shared as CUDA shares cuda tensors.

An infini tensor put on a ``torch.multiprocessing`` queue or pipe, passed to a
``spawn`` child, or returned by a DataLoader worker arrives in the other
process as a view of the *same* device memory: the receiver's in-place writes
are the sender's, and the memory lives while any process holds it. As with
CUDA, synchronize (or otherwise order) the writer's work before the reader
relies on it; sending synchronizes the sender's device once, so what was
queued before the send is in what arrives.

How: PyTorch has no reduction hook per device, so this module wraps the
reducers ``torch.multiprocessing`` registers on ``ForkingPickler`` and
handles infini tensors and storages itself. The first send moves the
storage into shared device memory (``_C._share_storage``, as CPU's
``share_memory_`` moves a CPU storage into shared memory); the receiver maps
the memory's file descriptor (``_C._open_shared_storage``), once per storage
(mappings are cached by the descriptor's identity, so two views of one
storage stay one storage).

Where the provider cannot share device memory (the Infini stack: InfiniRT
has no IPC API), sending raises in the sending call, naming the reason and
what to do instead. ``multiprocessing.Queue.put`` pickles in a feeder thread,
where an error would be lost and the consumer would wait forever, so ``put``
checks its object's infini tensors before queueing it.

A child *forked* after this process used infini cannot use it (as with CUDA):
use the ``spawn`` start method for workers that touch infini tensors.
"""

from __future__ import annotations

import multiprocessing.queues
import os
import threading
from multiprocessing.reduction import DupFd, ForkingPickler
from typing import Any

import torch

__all__ = ["sharing_unsupported_reason"]


def sharing_unsupported_reason() -> str:
    """Why infini tensors cannot be shared between processes here, or ``""``
    where they can (the host runtime shares them; the Infini stack cannot)."""
    from . import _C

    return _C._ipc_unsupported_reason()


def _is_infini(obj) -> bool:
    if isinstance(obj, torch.storage.TypedStorage):
        obj = obj._untyped_storage  # its .device warns that TypedStorage is deprecated
    device = getattr(obj, "device", None)
    return isinstance(device, torch.device) and device.type == "infini"


# Mappings opened in this process, by (device, the memory file's identity),
# held weakly: a storage sent twice (or two views of it) maps once, and the
# mapping goes with its last user.
_opened: dict[tuple[int, int, int], Any] = {}
_opened_lock = threading.Lock()


def _share(storage: torch.UntypedStorage) -> tuple[int, DupFd, int]:
    from . import _C

    holder = torch.empty(0, dtype=torch.uint8, device=storage.device).set_(storage)
    # The descriptor is the storage's own (as CPU's _share_fd_cpu_ returns):
    # DupFd duplicates it, or, while a spawn child is being started, hands
    # this very descriptor to the child, so it must stay open.
    device, fd, nbytes = _C._share_storage(holder)
    return device, DupFd(fd), nbytes


def _open(device: int, dup_fd: DupFd, nbytes: int) -> torch.UntypedStorage:
    from torch.multiprocessing.reductions import StorageWeakRef

    from . import _C

    fd = dup_fd.detach()
    info = os.fstat(fd)
    key = (device, info.st_dev, info.st_ino)
    with _opened_lock:
        ref = _opened.get(key)
        storage = None if ref is None else torch.UntypedStorage._new_with_weak_ptr(ref.cdata)
        if storage is not None:
            os.close(fd)
            return storage
        storage = _C._open_shared_storage(device, fd, nbytes).untyped_storage()
        for stale in [k for k, r in _opened.items() if r.expired()]:
            del _opened[stale]
        _opened[key] = StorageWeakRef(storage)
    return storage


def _rebuild_infini_tensor(cls, device, dup_fd, nbytes, dtype, size, stride, offset,
                           requires_grad):
    storage = _open(device, dup_fd, nbytes)
    t = torch.empty(0, dtype=dtype, device=storage.device).set_(storage, offset, size, stride)
    if cls is torch.nn.parameter.Parameter:
        # Parameters are leaves: the flag belongs to the constructor.
        return torch.nn.parameter.Parameter(t, requires_grad=requires_grad)
    t.requires_grad_(requires_grad)
    return t if cls is torch.Tensor else t.as_subclass(cls)


def _rebuild_infini_storage(device, dup_fd, nbytes):
    return _open(device, dup_fd, nbytes)


def _reduce_infini_tensor(tensor: torch.Tensor):
    device, dup_fd, nbytes = _share(tensor.untyped_storage())
    # Backward hooks are not sent, as torch's reduce_tensor does not send them.
    return (_rebuild_infini_tensor,
            (type(tensor), device, dup_fd, nbytes, tensor.dtype, tensor.size(), tensor.stride(),
             tensor.storage_offset(), tensor.requires_grad))


def _reduce_infini_storage(storage):
    if isinstance(storage, torch.storage.TypedStorage):
        untyped = storage._untyped_storage
        device, dup_fd, nbytes = _share(untyped)
        return (_rebuild_typed, (device, dup_fd, nbytes, storage.dtype))
    device, dup_fd, nbytes = _share(storage)
    return (_rebuild_infini_storage, (device, dup_fd, nbytes))


def _rebuild_typed(device, dup_fd, nbytes, dtype):
    return torch.storage.TypedStorage(wrap_storage=_open(device, dup_fd, nbytes), dtype=dtype,
                                      _internal=True)


def _sharing(reduce, reduce_infini):
    def reduce_sharing_infini(obj):
        if _is_infini(obj) and (not isinstance(obj, torch.Tensor) or obj.layout == torch.strided):
            # Sparse and nested infini tensors reduce to their strided parts.
            return reduce_infini(obj)
        return reduce(obj)

    reduce_sharing_infini._torch_infini_wraps = reduce  # type: ignore[attr-defined]
    return reduce_sharing_infini


def _infini_tensors(obj: Any, depth: int = 3):
    """The infini tensors and storages in `obj`, looked for in containers a
    few levels deep (what a queue's items are made of)."""
    if _is_infini(obj):
        yield obj
    elif depth > 0:
        if isinstance(obj, dict):
            for v in obj.values():
                yield from _infini_tensors(v, depth - 1)
        elif isinstance(obj, (list, tuple)):
            for v in obj:
                yield from _infini_tensors(v, depth - 1)


def _checking_put(put):
    def put_checked(self, obj, block=True, timeout=None):
        if any(True for _ in _infini_tensors(obj)):
            reason = sharing_unsupported_reason()
            if reason:
                raise RuntimeError(reason)
        return put(self, obj, block, timeout)

    put_checked._torch_infini_wraps = put  # type: ignore[attr-defined]
    return put_checked


def _register() -> None:
    """Wraps torch's tensor and storage reducers (registered by
    ``torch.multiprocessing``) for every type they serve, and
    ``multiprocessing.Queue.put``'s check."""
    from torch.multiprocessing import reductions

    tensor_reducers = (reductions.reduce_tensor,)
    storage_reducers = (reductions.reduce_storage, reductions.reduce_typed_storage,
                        reductions.reduce_typed_storage_child)
    for cls, reduce in list(ForkingPickler._extra_reducers.items()):
        if reduce in tensor_reducers:
            ForkingPickler.register(cls, _sharing(reduce, _reduce_infini_tensor))
        elif reduce in storage_reducers:
            ForkingPickler.register(cls, _sharing(reduce, _reduce_infini_storage))
    queue = multiprocessing.queues.Queue
    if not hasattr(queue.put, "_torch_infini_wraps"):
        queue.put = _checking_put(queue.put)
