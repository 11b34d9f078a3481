"""DistributedDataParallel on infini, launched with torchrun.

    TORCH_INFINI_HOST_DEVICES=2 torchrun --standalone --nproc-per-node=2 examples/ddp.py

Each process drives ``infini:<LOCAL_RANK>``; ``TORCH_INFINI_HOST_DEVICES=N``
makes the built-in host runtime simulate N devices on one machine.
``init_process_group()`` without a backend picks ``"infini"`` (collectives on
gloo over host staging buffers, stream-ordered), as it picks NCCL for CUDA.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import torch_infini  # noqa: F401  (registers the infini device and its c10d backend)


def main() -> None:
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    device = torch.device("infini", local_rank)
    torch.infini.set_device(device)
    dist.init_process_group(device_id=device)
    rank, world_size = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(0)  # the same initial parameters on every rank
    model = torch.nn.Sequential(
        torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8)
    ).to(device)
    ddp_model = DDP(model)
    optimizer = torch.optim.SGD(ddp_model.parameters(), lr=0.05)

    data = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
    for step in range(20):
        x = torch.randn(16, 32, generator=data).to(device)
        y = torch.randn(16, 8, generator=data).to(device)
        loss = torch.nn.functional.mse_loss(ddp_model(x), y)
        optimizer.zero_grad()
        loss.backward()  # gradients are all-reduced across ranks here
        optimizer.step()
        if rank == 0 and step % 5 == 0:
            print(f"step {step:2d}  loss {loss.item():.4f}")

    # DDP keeps the replicas identical: check it.
    flat = torch.cat([p.detach().flatten() for p in model.parameters()])
    replicas = [torch.empty_like(flat) for _ in range(world_size)]
    dist.all_gather(replicas, flat)
    assert all(torch.equal(r.cpu(), flat.cpu()) for r in replicas), "replicas diverged"
    if rank == 0:
        print(f"ddp OK: {world_size} ranks on {dist.get_backend_config()}, replicas identical")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
