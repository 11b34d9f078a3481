"""Sync debug mode contracts: ``set_sync_debug_mode`` / ``get_sync_debug_mode``
report the operations that make the host wait for the device (a blocking copy
to the host, ``.item()``, ``nonzero``), and leave the others alone.

Run on every backend (see conftest.py).
"""

from __future__ import annotations

import warnings

import pytest
import torch


@pytest.fixture
def restore_mode(mod):
    was = mod.get_sync_debug_mode()
    yield
    mod.set_sync_debug_mode(was)


@pytest.mark.covers("set_sync_debug_mode", "get_sync_debug_mode")
def test_modes_by_name_and_number(mod, restore_mode):
    for name, number in (("warn", 1), ("error", 2), ("default", 0)):
        mod.set_sync_debug_mode(name)
        assert mod.get_sync_debug_mode() == number
        mod.set_sync_debug_mode(number)
        assert mod.get_sync_debug_mode() == number
    with pytest.raises(RuntimeError, match="invalid value of debug_mode"):
        mod.set_sync_debug_mode("loud")


@pytest.mark.covers("set_sync_debug_mode")
def test_warn_reports_synchronizing_operations_only(mod, dev, restore_mode):
    x = torch.arange(6.0, device=dev)
    (x * 2).sum().item()  # warm: whatever the first calls do is not the program's
    torch.nonzero(x > 2)
    mod.synchronize()
    mod.set_sync_debug_mode("warn")
    for synchronizing in (lambda: x.sum().item(), lambda: x.cpu(), lambda: torch.nonzero(x > 2)):
        with pytest.warns(UserWarning, match="called a synchronizing"):
            synchronizing()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = x * 3 + 1  # queued: no wait
        mod.synchronize()  # asked for: not reported
    mod.set_sync_debug_mode("default")
    assert y.cpu().tolist() == [1.0, 4.0, 7.0, 10.0, 13.0, 16.0]


@pytest.mark.covers("set_sync_debug_mode")
def test_error_refuses_synchronizing_operations(mod, dev, restore_mode):
    x = torch.arange(4.0, device=dev)
    x.cpu()
    mod.set_sync_debug_mode("error")
    with pytest.raises(RuntimeError, match="called a synchronizing"):
        x.cpu()
