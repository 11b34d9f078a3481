"""The CUDA-to-infini switch: its state and the order its parts are installed.

The public face is :mod:`torch_infini.transfer_to_infini` (importing it turns
the switch on) and ``TORCH_INFINI_TRANSFER_CUDA=1`` (read when torch_infini
loads, at ``import torch``). The parts, one module each:

* :mod:`._torch_api`: device arguments everywhere PyTorch takes one, autocast,
  GradScaler, ``torch.load``;
* :mod:`._cuda_module`: ``torch.cuda`` answering as ``torch.infini``;
* :mod:`._distributed`: ``"nccl"`` and CUDA devices in torch.distributed.

Off, nothing of PyTorch is changed. On, it stays on for the process (as
``torch_npu.contrib.transfer_to_npu`` does): every change is recorded in
:data:`._map.CHANGES`, which ``changes()`` returns.
"""

from __future__ import annotations

import threading

from ._map import CHANGES, Change, names_cuda, to_infini, undo_all

#: The environment variable that turns the switch on at ``import torch``.
ENVIRONMENT_VARIABLE = "TORCH_INFINI_TRANSFER_CUDA"

_enabled = False
_lock = threading.Lock()


def is_enabled() -> bool:
    """Whether the CUDA-to-infini switch is on in this process."""
    return _enabled


def enable() -> None:
    """Turn the switch on (idempotent). See docs/transfer-cuda.md."""
    global _enabled
    with _lock:
        if _enabled:
            return
        from ..infini import _utils
        from . import _cuda_module, _distributed, _torch_api

        try:
            _torch_api.install()
            _cuda_module.install()
            _distributed.install()
        except BaseException:
            undo_all()  # all or nothing: never a half-mapped PyTorch
            raise
        _utils._other_device_type = to_infini_device
        _enabled = True


def to_infini_device(device):
    """torch.infini's device parsing under the switch: a CUDA device is the
    infini device of the same index."""
    return to_infini(device)


def changes() -> list[Change]:
    """Every change the switch made, in order (empty while it is off)."""
    return list(CHANGES)


__all__ = ["ENVIRONMENT_VARIABLE", "Change", "changes", "enable", "is_enabled", "names_cuda"]
