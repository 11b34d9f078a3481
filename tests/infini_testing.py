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


def needs_kernels(*ops: str) -> None:
    """Skip unless every operator has an infini kernel, or the opt-in CPU
    fallback is on (``TORCH_INFINI_CPU_FALLBACK=1``).

    For tests whose subject is native here (random draws, autocast casts) but
    whose arithmetic runs on operators another piece of work makes native
    (``mul``, ``mm``, ``softmax``, ...): they run through the fallback until
    then, and natively after, without changing the test."""
    missing = [op for op in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")]
    if missing and not torch_infini.fallback.is_enabled():
        pytest.skip(f"needs infini kernels for {', '.join(missing)} (or TORCH_INFINI_CPU_FALLBACK=1)")
