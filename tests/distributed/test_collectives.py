"""Every collective DDP and FSDP2 use, on infini tensors through the
"infini" backend, equals the same collective on CPU tensors over gloo, in
float32, bfloat16 and int64 (every ReduceOp in the dtypes it is defined for).
The comparisons run inside the ranks (tests/distributed/worker.py)."""

from __future__ import annotations

import pytest

from .conftest import assert_scenario_passed
from .worker import COLLECTIVES


@pytest.mark.parametrize("name", sorted(COLLECTIVES))
def test_collective_matches_gloo_on_cpu(world_size, mode, name):
    assert_scenario_passed(world_size, mode, f"collective:{name}")


def test_barrier_waits_for_the_last_rank(world_size, mode):
    assert_scenario_passed(world_size, mode, "barrier")


def test_reductions_gloo_cannot_compute_fail_at_the_call(world_size, mode):
    assert_scenario_passed(world_size, mode, "refusals")


def test_group_moves_data_as_asked(world_size, mode):
    assert_scenario_passed(world_size, mode, "copy_mode")
