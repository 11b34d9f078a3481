"""Tensor parallelism with DTensor on infini, 2 processes: a Linear-ReLU-Linear
MLP under ColwiseParallel then RowwiseParallel, and a classifier whose
sharded logits cross_entropy reduces under loss_parallel. Each rank's
output, loss and gradients (whole, gathered from the shards) must equal one
CPU process computing the same from the same seeds, without DTensor.

The ranks run tp_worker.py through launch.py (as the other distributed runs
do: a FileStore, gloo on the loopback interface, 2 host-runtime devices),
under a hard time limit; each rank destroys its process group before it
exits, and the launcher kills both at the limit.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infini_testing import on_host

from . import tp_worker
from .launch import launch

WORLD_SIZE = 2
BACKEND = "infini"
#: The whole run (2 interpreters starting, both cases) takes about 10 s on an
#: idle machine; the limit leaves room for a loaded one and still bounds a hang.
RUN_TIMEOUT_S = 180


@pytest.fixture(scope="module")
def ranks() -> list[dict]:
    """Every rank's results, after one run of both cases."""
    run = launch(WORLD_SIZE, BACKEND, timeout=RUN_TIMEOUT_S, worker=tp_worker.__file__)
    if run["error"]:
        pytest.fail(f"the {WORLD_SIZE}-rank tensor-parallel run failed:\n{run['error']}", pytrace=False)
    return run["ranks"]


def _results(ranks: list[dict], case: str) -> list[dict[str, torch.Tensor]]:
    """The case's tensors per rank; fails with every rank's traceback. A rank
    refused an operator its Infini stack has no InfiniOps kernel for (a
    WITH_TORCH=OFF build has no div) skips the case with that refusal, as
    ``unserved_skips`` does in one process."""
    errors = {r: results[case]["error"] if case in results else f"did not run {case}"
              for r, results in enumerate(ranks) if case not in results or results[case]["error"]}
    refusals = [next((line for line in error.splitlines()
                      if line.startswith("NotImplementedError:") and "InfiniOps" in line), None)
                for error in errors.values()]
    if errors and not on_host() and all(refusals):
        pytest.skip(refusals[0][:300])
    if errors:
        pytest.fail("\n".join(f"rank {r}:\n{error}" for r, error in errors.items()), pytrace=False)
    return [{name: torch.tensor(t["values"], dtype=getattr(torch, t["dtype"]))
             for name, t in results[case]["tensors"].items()} for results in ranks]


def _local_shapes(ranks: list[dict], case: str) -> list[dict[str, list[int]]]:
    return [results[case]["local_shapes"] for results in ranks]


def _compare(got: dict[str, torch.Tensor], want: dict[str, torch.Tensor]) -> None:
    assert sorted(got) == sorted(want)
    for name in want:
        torch.testing.assert_close(got[name], want[name], msg=lambda m, name=name: f"{name}: {m}")


def _cpu_mlp() -> dict[str, torch.Tensor]:
    model = tp_worker.build_mlp()
    x, target = tp_worker.mlp_batch()
    out = model(x)
    loss = F.mse_loss(out, target)
    loss.backward()
    return {"output": out.detach(), "loss": loss.detach(),
            **{f"grad:{name}": p.grad for name, p in model.named_parameters()}}


def _cpu_head() -> dict[str, torch.Tensor]:
    head = tp_worker.build_head()
    x, target = tp_worker.head_batch()
    logits = head(x)
    loss = F.cross_entropy(logits, target)
    loss.backward()
    return {"logits": logits.detach(), "loss": loss.detach(),
            **{f"grad:{name}": p.grad for name, p in head.named_parameters()}}


def test_mlp_colwise_then_rowwise_matches_one_cpu_process(ranks):
    want = _cpu_mlp()
    for got in _results(ranks, "mlp"):
        _compare(got, want)
    # The parameters really are sharded: 16 hidden units, 8 per rank.
    for shapes in _local_shapes(ranks, "mlp"):
        assert shapes == {"0.weight": [8, 8], "0.bias": [8], "2.weight": [4, 8], "2.bias": [4]}, shapes


def test_loss_parallel_cross_entropy_matches_one_cpu_process(ranks):
    want = _cpu_head()
    for got in _results(ranks, "loss_parallel"):
        _compare(got, want)
    # 10 classes, 5 per rank: each rank held only its part of the logits.
    for shapes in _local_shapes(ranks, "loss_parallel"):
        assert shapes == {"weight": [5, 8], "bias": [5]}, shapes
