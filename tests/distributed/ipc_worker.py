"""What the spawned processes of test_multiprocessing.py run. A module of its
own: a spawn child imports its target by name, without the test module."""

from __future__ import annotations

import torch

import torch_infini  # noqa: F401  (registers infini in the child)


def add_in_place(tensor: torch.Tensor, done) -> None:
    """Writes into the parent's tensor, then says so."""
    tensor.add_(100)
    torch.infini.synchronize()  # the write is done before the parent reads
    done.put(tensor.device.type)


def produce(queue, release) -> None:
    """Sends an infini tensor, reads back what the receiver wrote into it,
    drops it, and exits once the receiver says so: the receiver's copy must
    outlive this process."""
    t = torch.arange(8.0, device="infini") * 2
    queue.put(t)
    release.get()                         # the receiver wrote t[0] = -1
    queue.put(t.cpu().tolist())
    del t
    release.get()


class InfiniRange(torch.utils.data.Dataset):
    """Items made on infini in the DataLoader's workers."""

    def __len__(self) -> int:
        return 6

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.full((3,), float(i), device="infini")
