"""torch.multiprocessing and infini tensors: sharing is refused at the
pickling step, naming what to do instead; CPU tensors still share."""

from __future__ import annotations

import io
import multiprocessing
from multiprocessing.reduction import ForkingPickler

import pytest
import torch

from torch_infini.multiprocessing import SHARING_REFUSAL


def _dumps(obj) -> bytes:
    buf = io.BytesIO()
    ForkingPickler(buf).dump(obj)
    return buf.getvalue()


@pytest.mark.parametrize("make", [
    lambda: torch.ones(3, device="infini"),
    lambda: torch.nn.Parameter(torch.ones(3, device="infini")),
    lambda: torch.ones(3, device="infini").untyped_storage(),
    lambda: torch.ones(3, device="infini")[1:],
], ids=["tensor", "parameter", "untyped_storage", "view"])
def test_sharing_an_infini_tensor_is_refused_naming_the_alternative(make):
    with pytest.raises(RuntimeError) as info:
        _dumps(make())
    message = str(info.value)
    assert message == SHARING_REFUSAL
    assert "tensor.cpu()" in message and "torch.distributed" in message


def test_cpu_tensors_still_share():
    t = torch.arange(6.0)
    shared = ForkingPickler.loads(_dumps(t))
    assert torch.equal(shared, t)
    assert shared.is_shared()


def test_spawning_a_process_with_an_infini_argument_fails_in_the_parent():
    ctx = multiprocessing.get_context("spawn")
    process = ctx.Process(target=print, args=(torch.ones(2, device="infini"),))
    with pytest.raises(RuntimeError, match="cannot share infini tensors"):
        process.start()
    assert process._popen is None or process._popen.poll() is not None
