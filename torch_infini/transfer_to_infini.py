"""Run CUDA-written PyTorch programs on infini, unmodified.

    import torch
    import torch_infini.transfer_to_infini   # or: TORCH_INFINI_TRANSFER_CUDA=1 python train.py

Importing this module turns on the CUDA-to-infini switch for the process
(the same as ``torch_npu.contrib.transfer_to_npu`` for Ascend): ``"cuda"`` and
``"cuda:N"`` devices passed to PyTorch become ``infini``/``infini:N``,
``torch.cuda.*`` answers as ``torch.infini``, autocast and ``GradScaler`` for
``"cuda"`` act on infini, and ``init_process_group("nccl")`` uses infini's
c10d backend. What cannot be mapped raises, naming the CUDA API and what to
use instead. Off (the default), nothing of PyTorch is changed.

``is_enabled()`` says whether it is on, ``changes()`` lists every change it
made, and ``python -m torch_infini`` reports it. docs/transfer-cuda.md has
the full list and what the switch does not cover.
"""

from __future__ import annotations

from ._transfer import ENVIRONMENT_VARIABLE, Change, changes, enable, is_enabled

enable()

__all__ = ["ENVIRONMENT_VARIABLE", "Change", "changes", "enable", "is_enabled"]
