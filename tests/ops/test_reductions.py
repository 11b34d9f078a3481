"""sum, mean, argmax, amax, max/min, all/any on infini against CPU PyTorch."""

from __future__ import annotations

import pytest
import torch

from infini_testing import DEV, FLOAT_IDS, FLOATS, matches_cpu, sample


def values(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 4).round().to(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_sum_and_mean_over_dims(dtype):
    x = values(3, 4, 5, dtype=dtype)
    for dims in ([0], [-1], [0, 2], []):
        for keepdim in (False, True):
            matches_cpu(lambda x: torch.sum(x, dims, keepdim=keepdim), x)
            if dims:
                matches_cpu(lambda x: torch.mean(x, dims, keepdim=keepdim), x)
    matches_cpu(torch.sum, x)
    matches_cpu(torch.mean, x)
    matches_cpu(lambda x: x.transpose(0, 2).sum(1), x)             # strided input
    matches_cpu(lambda x: x.sum(-1, dtype=torch.float32), x)       # accumulate in float32


def test_integer_and_bool_sums_and_empty_reductions():
    matches_cpu(lambda x: x.sum(0), sample((4, 3), torch.int32))   # int64 result, as on CPU
    matches_cpu(lambda x: x.sum(), sample((4, 3), torch.bool))
    matches_cpu(lambda x: x.sum(0), torch.zeros(0, 3))
    matches_cpu(lambda x: x.mean(0), torch.zeros(0, 3))            # nan, as on CPU


def test_argmax_amax_max_min_all_any():
    x = values(4, 6)
    matches_cpu(lambda x: torch.argmax(x, -1), x)
    matches_cpu(lambda x: torch.argmax(x, 0, keepdim=True), x)
    matches_cpu(torch.argmax, x)
    matches_cpu(lambda x: torch.amax(x, (0, 1)), x)
    matches_cpu(torch.max, x)
    matches_cpu(torch.min, x)
    matches_cpu(lambda x: (x > 0).all(), x)
    matches_cpu(lambda x: (x > 100).any(), x)


def test_reductions_return_device_tensors_usable_as_scalars():
    x = torch.arange(10.0, device=DEV)
    assert x.sum().item() == 45.0
    assert float(x.mean()) == 4.5
    assert int(x.argmax()) == 9
