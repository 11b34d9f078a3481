"""DDP and FSDP2 (fully_shard) training loops on infini: after 5 SGD steps
on rank-local slices of a global batch, the parameters equal a
single-process CPU run on the whole batch."""

from __future__ import annotations

from .conftest import assert_scenario_passed


def test_ddp_matches_single_process(world_size, mode):
    assert_scenario_passed(world_size, mode, "ddp")


def test_fsdp2_matches_single_process(world_size, mode):
    assert_scenario_passed(world_size, mode, "fsdp2")
