"""Collectives are stream-ordered: they wait for the work queued before them
on the current stream without blocking the caller, and work queued after
wait() (or in a future's callback) sees the result."""

from __future__ import annotations

import pytest

from .conftest import assert_scenario_passed


@pytest.mark.parametrize("name", ["async_ordering", "wait_orders_other_stream",
                                  "future_ordering", "many_in_flight"])
def test_stream_ordering(world_size, mode, name):
    assert_scenario_passed(world_size, mode, name)
