"""Mixed-precision contracts: the device module's amp namespace binds
torch.amp's autocast and GradScaler to the device.

Run on every backend (see conftest.py). torch.cuda.amp's forms are deprecated
in favour of torch.amp (a FutureWarning, ignored here); torch.infini.amp's are
not. The op policy itself is checked in tests/test_autocast.py.
"""

from __future__ import annotations

import warnings

import pytest
import torch


def _quiet(make):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return make()


@pytest.mark.covers("amp")
def test_amp_autocast_enters_the_device_region(mod, backend):
    assert torch.amp.is_autocast_available(backend)
    ctx = _quiet(lambda: mod.amp.autocast(dtype=torch.bfloat16))
    assert isinstance(ctx, torch.amp.autocast)
    assert not torch.is_autocast_enabled(backend)
    with ctx:
        assert torch.is_autocast_enabled(backend)
        assert torch.get_autocast_dtype(backend) == torch.bfloat16
        with _quiet(lambda: mod.amp.autocast(enabled=False)):
            assert not torch.is_autocast_enabled(backend)
        assert torch.is_autocast_enabled(backend)
    assert not torch.is_autocast_enabled(backend)


@pytest.mark.covers("amp")
def test_amp_autocast_default_dtype_is_float16(mod, backend):
    with _quiet(lambda: mod.amp.autocast()):
        assert torch.get_autocast_dtype(backend) == torch.float16


@pytest.mark.covers("amp")
def test_amp_grad_scaler_is_bound_to_the_device(mod, backend):
    scaler = _quiet(lambda: mod.amp.GradScaler(init_scale=64.0, growth_interval=10))
    assert isinstance(scaler, torch.amp.GradScaler)
    assert scaler._device == backend
    assert scaler.is_enabled()
    assert scaler.get_scale() == 64.0
    assert scaler.get_growth_interval() == 10
