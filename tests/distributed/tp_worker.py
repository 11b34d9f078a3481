"""One rank of the tensor-parallel run (tests/distributed/test_tensor_parallel.py).

    python tp_worker.py RANK WORLD_SIZE STORE_FILE OUT_DIR BACKEND

Rank r drives ``infini:r`` (TORCH_INFINI_HOST_DEVICES simulates the devices;
on the Infini stack's CPU backend every rank drives its process's ``infini:0``)
in a 1-D device mesh ``init_device_mesh("infini", (WORLD_SIZE,))``, and runs
each case of ``CASES``: the model and data come from the builders below, from
fixed seeds, so the test computes the same on the CPU in one process (its
oracle). Every case's full results (outputs, loss, gradients, as CPU tensors
turned into lists) or its traceback go to ``OUT_DIR/rank<r>.json`` as
``{case: {"error": None | traceback, "tensors": {name: {"dtype", "values"}},
"local_shapes": {parameter: shape}}}``.
"""

from __future__ import annotations

import datetime
import json
import os
import sys
import traceback
from typing import Callable

import torch
import torch.nn.functional as F

#: How long a collective may wait for the other rank before it fails (the
#: test's launcher kills both ranks later than this).
COLLECTIVE_TIMEOUT_S = 60


def build_mlp() -> torch.nn.Sequential:
    """Linear -> ReLU -> Linear, from seed 0 (16 hidden units: 8 per rank on 2)."""
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def mlp_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """The MLP's input and its regression target."""
    g = torch.Generator().manual_seed(1)
    return torch.randn(6, 8, generator=g), torch.randn(6, 4, generator=g)


def build_head() -> torch.nn.Linear:
    """The classifier whose logits loss_parallel reduces: 10 classes (5 per
    rank on 2), from seed 2."""
    torch.manual_seed(2)
    return torch.nn.Linear(8, 10)


def head_batch() -> tuple[torch.Tensor, torch.Tensor]:
    """The classifier's input and class targets."""
    g = torch.Generator().manual_seed(3)
    return torch.randn(6, 8, generator=g), torch.randint(0, 10, (6,), generator=g)


def _full(t: torch.Tensor) -> torch.Tensor:
    """A DTensor's whole value (or a plain tensor), on the CPU."""
    from torch.distributed.tensor import DTensor

    return (t.full_tensor() if isinstance(t, DTensor) else t).detach().cpu()


def _local_shapes(model: torch.nn.Module) -> dict[str, list[int]]:
    return {name: list(p.to_local().shape) for name, p in model.named_parameters()}


def mlp_case(mesh, device: torch.device) -> dict:
    """ColwiseParallel on the first Linear, RowwiseParallel on the second: the
    output, the MSE loss and every parameter's gradient."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    model = parallelize_module(build_mlp().to(device), mesh, {"0": ColwiseParallel(), "2": RowwiseParallel()})
    x, target = mlp_batch()
    out = model(x.to(device))
    loss = F.mse_loss(out, target.to(device))
    loss.backward()
    tensors = {"output": _full(out), "loss": _full(loss)}
    tensors.update({f"grad:{name}": _full(p.grad) for name, p in model.named_parameters()})
    return {"tensors": tensors, "local_shapes": _local_shapes(model)}


def loss_parallel_case(mesh, device: torch.device) -> dict:
    """A Linear whose logits stay a DTensor sharded on the class dimension
    (ColwiseParallel, use_local_output=False, output_layouts=Shard(-1)), and
    cross_entropy under loss_parallel: the logits, the loss and the
    gradients."""
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, loss_parallel, parallelize_module

    head = parallelize_module(build_head().to(device), mesh,
                              ColwiseParallel(output_layouts=Shard(-1), use_local_output=False))
    x, target = head_batch()
    logits = head(x.to(device))
    assert isinstance(logits, DTensor) and logits.placements == (Shard(logits.ndim - 1),), logits
    with loss_parallel():
        loss = F.cross_entropy(logits, target.to(device))
        loss.backward()
    tensors = {"logits": _full(logits), "loss": _full(loss)}
    tensors.update({f"grad:{name}": _full(p.grad) for name, p in head.named_parameters()})
    return {"tensors": tensors, "local_shapes": _local_shapes(head)}


CASES: dict[str, Callable] = {"mlp": mlp_case, "loss_parallel": loss_parallel_case}


def _as_json(tensors: dict[str, torch.Tensor]) -> dict:
    return {name: {"dtype": str(t.dtype).removeprefix("torch."), "values": t.tolist()} for name, t in tensors.items()}


def main() -> None:
    rank, world, store_file, out_dir, backend = sys.argv[1:6]
    rank, world = int(rank), int(world)
    import torch.distributed as dist
    from torch.distributed.device_mesh import init_device_mesh

    import torch_infini  # noqa: F401

    # One device per rank: the host runtime simulates WORLD_SIZE of them;
    # InfiniRT's CPU backend has one, and each process its own memory on it.
    device = torch.device("infini", rank % torch.infini.device_count())
    torch.infini.set_device(device)
    dist.init_process_group(backend, init_method=f"file://{store_file}", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=COLLECTIVE_TIMEOUT_S))
    results: dict[str, dict] = {}
    try:
        mesh = init_device_mesh("infini", (world,))
        for name, case in CASES.items():
            print(f"rank {rank}: {name}", flush=True)  # the log shows where a run hangs
            try:
                done = case(mesh, device)
                torch.infini.synchronize()
                results[name] = {"error": None, "tensors": _as_json(done["tensors"]),
                                 "local_shapes": done["local_shapes"]}
            except Exception:
                results[name] = {"error": traceback.format_exc()}
            dist.barrier()  # a failed case can leave a rank behind: line the ranks up again
    finally:
        dist.destroy_process_group()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
