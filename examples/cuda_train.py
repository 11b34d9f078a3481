"""A training script written for CUDA, in the shape of common ones, that runs
unchanged on infini with the CUDA-to-infini switch on.

Nothing here knows about infini: ``--device cuda``, ``'cuda' in device``
checks, ``torch.cuda.set_device(local_rank)``, ``init_process_group('nccl')``,
bfloat16 autocast through ``torch.amp``, ``torch.cuda.amp.GradScaler`` for
float16, optional ``torch.compile``, DDP::

    TORCH_INFINI_TRANSFER_CUDA=1 python examples/cuda_train.py --device cuda
    TORCH_INFINI_TRANSFER_CUDA=1 python examples/cuda_train.py --device cuda --dtype bfloat16 --compile
    TORCH_INFINI_TRANSFER_CUDA=1 TORCH_INFINI_HOST_DEVICES=2 \\
        torchrun --standalone --nproc-per-node=2 examples/cuda_train.py --device cuda

and the same on the CPU (``--device cpu``; gloo under torchrun) gives the same
losses and final parameters for the same ``--seed``. ``--out FILE`` saves them
(``torch.save``) for comparing runs.
"""

from __future__ import annotations

import argparse
import os
from contextlib import nullcontext

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed import destroy_process_group, init_process_group
from torch.nn.parallel import DistributedDataParallel as DDP


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.fc = nn.Linear(width, 4 * width)
        self.proj = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(F.relu(self.fc(x)))


class Net(nn.Module):
    def __init__(self, vocab: int, width: int, depth: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, vocab)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        logits = self.head(self.blocks(self.embed(idx)))
        # The loss in float32, as most scripts do under autocast.
        loss = F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda, cuda:N or cpu")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--compile", action="store_true", help="torch.compile the model")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--seed", type=int, default=1337)
    parser.add_argument("--out", default="", help="save losses and final parameters here (torch.save)")
    args = parser.parse_args()

    # Distributed set-up as CUDA scripts write it.
    ddp = int(os.environ.get("RANK", -1)) != -1
    device = args.device
    if ddp:
        init_process_group(backend="nccl" if "cuda" in device else "gloo")
        rank = int(os.environ["RANK"])
        local_rank = int(os.environ["LOCAL_RANK"])
        world_size = int(os.environ["WORLD_SIZE"])
        if "cuda" in device:
            device = f"cuda:{local_rank}"
            torch.cuda.set_device(device)
    else:
        rank, local_rank, world_size = 0, 0, 1
    master = rank == 0

    torch.manual_seed(args.seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed(args.seed)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    device_type = "cuda" if "cuda" in device else "cpu"
    ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[args.dtype]
    ctx = nullcontext() if args.dtype == "float32" else torch.amp.autocast(device_type=device_type, dtype=ptdtype)

    vocab, width, block = 64, 32, 16
    model = Net(vocab, width, depth=2).to(device)
    scaler = torch.cuda.amp.GradScaler(enabled=(args.dtype == "float16"))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    if args.compile:
        model = torch.compile(model)
    if ddp:
        model = DDP(model, device_ids=[local_rank] if device_type == "cuda" else None)

    # Each rank its own batches, drawn on the CPU (the same numbers on every device).
    data = torch.Generator().manual_seed(args.seed + rank)
    losses = []
    for step in range(args.steps):
        x = torch.randint(vocab, (args.batch_size, block), generator=data)
        y = torch.randint(vocab, (args.batch_size, block), generator=data)
        if device_type == "cuda":
            x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        else:
            x, y = x.to(device), y.to(device)
        with ctx:
            logits, loss = model(x, y)
        if step == 0 and master:
            print(f"activations {logits.dtype} on {logits.device.type}")
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        if master:
            print(f"step {step} loss {loss.item():.6f}")

    if device_type == "cuda":
        torch.cuda.synchronize()
    raw = model.module if ddp else model
    raw = getattr(raw, "_orig_mod", raw)
    if master and args.out:
        torch.save({"losses": losses, "parameters": {k: v.detach().cpu() for k, v in raw.state_dict().items()},
                    "world_size": world_size, "activation_dtype": str(logits.dtype),
                    "parameter_device": next(raw.parameters()).device.type}, args.out)
    if master:
        print(f"cuda_train OK: {world_size} process(es), device {device}, final loss {losses[-1]:.6f}")
    if ddp:
        destroy_process_group()


if __name__ == "__main__":
    main()
