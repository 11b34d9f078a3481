"""Random-number contracts: default generators, seeding and RNG state.

Run on every backend (see conftest.py); each test names the torch.cuda symbols
it gates with ``@pytest.mark.covers``. Each test restores the RNG states it
changes, so test order never changes other tests' numbers.
"""

from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True)
def _keep_rng_states(mod):
    cpu = torch.get_rng_state()
    states = mod.get_rng_state_all()
    yield
    torch.set_rng_state(cpu)
    mod.set_rng_state_all(states)


@pytest.mark.covers("default_generators")
def test_default_generators_one_per_device(mod, backend):
    gens = mod.default_generators
    assert isinstance(gens, tuple)
    assert len(gens) == mod.device_count()
    for index, gen in enumerate(gens):
        assert isinstance(gen, torch.Generator)
        assert gen.device == torch.device(backend, index)
    assert mod.default_generators[0] is gens[0]


@pytest.mark.covers("manual_seed", "initial_seed")
def test_manual_seed_sets_the_current_device_seed(mod, dev):
    mod.manual_seed(1234)
    assert mod.initial_seed() == 1234
    a = torch.rand(16, device=dev)
    mod.manual_seed(1234)
    b = torch.rand(16, device=dev)
    assert torch.equal(a.cpu(), b.cpu())
    mod.manual_seed(1235)
    assert not torch.equal(torch.rand(16, device=dev).cpu(), a.cpu())


@pytest.mark.covers("manual_seed_all", "initial_seed")
def test_manual_seed_all_seeds_every_device(mod):
    mod.manual_seed_all(77)
    assert [g.initial_seed() for g in mod.default_generators] == [77] * mod.device_count()
    assert mod.initial_seed() == 77


@pytest.mark.covers("manual_seed_all")
def test_torch_manual_seed_reaches_the_device(mod, dev):
    torch.manual_seed(99)
    assert mod.initial_seed() == 99
    a = torch.randn(8, device=dev)
    torch.manual_seed(99)
    assert torch.equal(torch.randn(8, device=dev).cpu(), a.cpu())


@pytest.mark.covers("seed", "seed_all", "initial_seed")
def test_seed_and_seed_all_pick_fresh_seeds(mod):
    mod.manual_seed_all(5)
    mod.seed()
    first = mod.initial_seed()
    assert first != 5  # non-deterministic: 1 in 2**64 to collide
    mod.seed_all()
    seeds = {g.initial_seed() for g in mod.default_generators}
    assert len(seeds) == 1  # one fresh seed, shared by all devices
    assert seeds != {first}


@pytest.mark.covers("get_rng_state", "set_rng_state")
def test_rng_state_round_trip(mod, dev, backend):
    mod.manual_seed(3)
    state = mod.get_rng_state()
    assert state.dtype == torch.uint8
    assert state.device.type == "cpu"
    a = torch.rand(32, device=dev)
    mod.set_rng_state(state)
    assert torch.equal(torch.rand(32, device=dev).cpu(), a.cpu())
    # The device argument forms of torch.cuda.random.
    for device in (0, f"{backend}:0", torch.device(backend, 0), backend):
        mod.set_rng_state(state, device)
        assert torch.equal(mod.get_rng_state(device), state)


@pytest.mark.covers("get_rng_state_all", "set_rng_state_all")
def test_rng_state_all_round_trip(mod, dev):
    states = mod.get_rng_state_all()
    assert len(states) == mod.device_count()
    a = torch.rand(8, device=dev)
    mod.set_rng_state_all(states)
    assert torch.equal(torch.rand(8, device=dev).cpu(), a.cpu())


@pytest.mark.covers("random")
def test_random_submodule_holds_the_functions(mod):
    for name in ("manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed",
                 "get_rng_state", "get_rng_state_all", "set_rng_state", "set_rng_state_all"):
        assert getattr(mod.random, name) is getattr(mod, name)
