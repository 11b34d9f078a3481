"""infini generators: torch.Generator('infini'), state format, clone, seeding
without warnings or device initialization, fork safety."""

from __future__ import annotations

import warnings

import pytest
import torch

import torch_infini  # noqa: F401
from conftest import run_python

DEV = torch.device("infini:0")


# Each test leaves the CPU and infini generators as it found them.
pytestmark = pytest.mark.usefixtures("rng_states_kept")


def test_generator_on_the_device():
    g = torch.Generator("infini")
    assert g.device == DEV
    assert torch.Generator(device=DEV).device == DEV
    assert g.initial_seed() == 67280421310721  # PyTorch's default seed, as CPU/CUDA


def test_generator_seeding_and_state_round_trip():
    g = torch.Generator("infini").manual_seed(2024)
    assert g.initial_seed() == 2024
    state = g.get_state()
    a = torch.rand(64, device=DEV, generator=g)
    g.set_state(state)
    b = torch.rand(64, device=DEV, generator=g)
    assert torch.equal(a.cpu(), b.cpu())
    assert not torch.equal(torch.rand(64, device=DEV, generator=g).cpu(), a.cpu())


def test_state_is_the_cpu_generator_state():
    """An infini generator's state is a CPU generator's state: interchangeable."""
    g = torch.Generator("infini").manual_seed(11)
    cpu = torch.Generator().manual_seed(11)
    assert torch.equal(g.get_state(), cpu.get_state())
    cpu.manual_seed(12)
    g.set_state(cpu.get_state())
    assert torch.equal(torch.randn(10, device=DEV, generator=g).cpu(), torch.randn(10, generator=cpu))


def test_clone_continues_independently():
    g = torch.Generator("infini").manual_seed(5)
    torch.rand(3, device=DEV, generator=g)
    c = g.clone_state()
    assert c.device == DEV
    assert torch.equal(torch.rand(8, device=DEV, generator=c).cpu(), torch.rand(8, device=DEV, generator=g).cpu())


def test_bad_state_is_refused():
    with pytest.raises(RuntimeError):
        torch.Generator("infini").set_state(torch.zeros(3, dtype=torch.uint8))


def test_offsets_are_refused_with_the_reason():
    with pytest.raises(RuntimeError, match="no Philox offset"):
        torch.Generator("infini").get_offset()


def test_cpu_generator_for_an_infini_tensor_is_refused():
    with pytest.raises(RuntimeError, match="generator is on cpu.*torch.Generator\\(device='infini'\\)"):
        torch.rand(3, device=DEV, generator=torch.Generator())


def test_default_generator_is_the_hooks_generator():
    torch.infini.manual_seed(8)
    assert torch.infini.default_generators[0].initial_seed() == 8
    # torch.get_device_module and torch.random.fork_rng go through the module.
    with torch.random.fork_rng(device_type="infini"):
        torch.infini.manual_seed(9)
    assert torch.infini.initial_seed() == 8


def test_torch_manual_seed_does_not_warn():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.manual_seed(0)
        torch.seed()
    assert [str(w.message) for w in caught] == []


def test_seeding_does_not_initialize_the_device():
    result = run_python(
        """
        import warnings
        warnings.simplefilter("error")
        import torch, torch_infini
        torch.manual_seed(3)
        torch.infini.manual_seed_all(3)
        torch.infini.seed_all()
        print(torch.infini.is_initialized())
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_fresh_process_default_seed_is_non_deterministic():
    code = "import torch, torch_infini; print(torch.infini.initial_seed())"
    first, second = run_python(code), run_python(code)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.strip() != second.stdout.strip()


def test_bad_fork_child_ignores_seeding_and_refuses_generators():
    result = run_python(
        """
        import os, torch, torch_infini
        torch.ones(1, device="infini")  # start the runtime
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                assert torch.infini._is_in_bad_fork()
                torch.manual_seed(1)          # skipped for infini, as for CUDA
                torch.infini.manual_seed_all(1)  # silently ignored
                try:
                    torch.Generator("infini")
                    code = 3
                except RuntimeError as e:
                    code = 0 if "forked subprocess" in str(e) else 4
            except BaseException:
                code = 2
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        print(os.waitstatus_to_exitcode(status))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "0"
