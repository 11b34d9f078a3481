"""Helpers shared by the test files (imported as ``infini_testing``)."""

from __future__ import annotations

import pytest
import torch

import torch_infini


def hold(stream: torch.Stream, ms: float) -> None:
    """Queue a host-side sleep of ``ms`` on ``stream`` (work after it waits).

    Skips the calling test where the provider cannot queue host work (the
    Infini stack), since "pending" is then not observable."""
    if not torch_infini._C._test_enqueue_delay(stream.stream_id, stream.device_index, float(ms)):
        pytest.skip("the active provider cannot queue a timed wait on a stream")


def sample(shape, dtype: torch.dtype) -> torch.Tensor:
    """Deterministic, mostly distinct CPU values of ``dtype``."""
    n = 1
    for s in shape:
        n *= s
    base = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return (base % 3 == 1).reshape(shape)
    if dtype.is_floating_point:
        return ((base.to(torch.float64) - n / 2) * 0.25).to(dtype).reshape(shape)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -50), min(info.max, 77)
    return (lo + base % (hi - lo + 1)).to(dtype).reshape(shape)
