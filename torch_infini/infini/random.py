"""Random number generation: the torch.cuda.random functions of the same names.

Every infini device has a default generator (``torch.infini.default_generators``),
created on first use with a non-deterministic seed, as CUDA's are.
``torch.manual_seed`` and ``torch.seed`` reseed them all (through
``manual_seed_all``). An infini generator's state is a CPU generator's state:
for the same seed, random operators on infini produce the numbers the CPU
produces, on every provider.

Seeding never initializes the device (``is_initialized()`` stays ``False``),
and, as with CUDA, seeding calls are silently ignored where no infini device
is available or in a process forked after the runtime started.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Union

import torch
from torch import Tensor

from .. import _C
from . import _utils
from ._utils import _check_index

__all__ = [
    "get_rng_state",
    "get_rng_state_all",
    "set_rng_state",
    "set_rng_state_all",
    "manual_seed",
    "manual_seed_all",
    "seed",
    "seed_all",
    "initial_seed",
]

_DeviceArg = Union[int, str, torch.device]

# Python objects of the default generators, one per device, made once so that
# `torch.infini.default_generators[i] is torch.infini.default_generators[i]`.
_default_generator_objects: dict[int, torch.Generator] = {}


def _default_generator(index: int) -> torch.Generator:
    gen = _default_generator_objects.get(index)
    if gen is None:
        gen = _C._default_generator(_check_index(index))
        _default_generator_objects[index] = gen
    return gen


def _default_generators() -> tuple[torch.Generator, ...]:
    return tuple(_default_generator(i) for i in range(_C._device_count()))


def _index_of(device: _DeviceArg) -> int:
    """torch.cuda.random's device argument: an int, "infini", "infini:N" or a
    torch.device; no index means the current device."""
    if isinstance(device, str):
        device = torch.device(device)
    elif isinstance(device, int):
        device = torch.device("infini", device)
    if device.type != "infini":
        device = _utils._other_device_type(device)
    if device.type != "infini":
        raise ValueError(f"Expected an infini device, but got: {device}")
    index = device.index
    if index is None:
        index = _C._current_device()
    return index


def _seeding_possible() -> bool:
    # torch.cuda defers seeding calls to an initialization that, without a
    # device or in a bad fork, never comes: the call has no effect.
    # A runtime that cannot start (a malformed TORCH_INFINI_* variable) is
    # reported by the next device use, not by torch.manual_seed.
    if _C._is_in_bad_fork():
        return False
    try:
        return _C._device_count() > 0
    except RuntimeError:
        return False


def get_rng_state(device: _DeviceArg = "infini") -> Tensor:
    r"""Return the random number generator state of the specified device as a ByteTensor.

    The state is a CPU ``torch.ByteTensor`` (the same format as
    :func:`torch.get_rng_state`).

    Args:
        device (torch.device or int, optional): The device to return the RNG state of.
            Default: ``'infini'`` (i.e., ``torch.device('infini')``, the current infini device).
    """
    return _default_generator(_index_of(device)).get_state()


def get_rng_state_all() -> list[Tensor]:
    r"""Return a list of ByteTensor representing the random number states of all devices."""
    return [get_rng_state(i) for i in range(_C._device_count())]


def set_rng_state(new_state: Tensor, device: _DeviceArg = "infini") -> None:
    r"""Set the random number generator state of the specified device.

    Args:
        new_state (torch.ByteTensor): The desired state
        device (torch.device or int, optional): The device to set the RNG state.
            Default: ``'infini'`` (i.e., ``torch.device('infini')``, the current infini device).
    """
    _default_generator(_index_of(device)).set_state(new_state)


def set_rng_state_all(new_states: Iterable[Tensor]) -> None:
    r"""Set the random number generator state of all devices.

    Args:
        new_states (Iterable of torch.ByteTensor): The desired state for each device.
    """
    for i, state in enumerate(new_states):
        set_rng_state(state, i)


def manual_seed(seed: int) -> None:
    r"""Set the seed for generating random numbers for the current infini device.

    It's safe to call this function if infini is not available; in that
    case, it is silently ignored.

    Args:
        seed (int): The desired seed.

    .. warning::
        If you are working with a multi-device model, this function is insufficient
        to get determinism.  To seed all devices, use :func:`manual_seed_all`.
    """
    seed = int(seed)
    if _seeding_possible():
        _default_generator(_C._current_device()).manual_seed(seed)


def manual_seed_all(seed: int) -> None:
    r"""Set the seed for generating random numbers on all infini devices.

    It's safe to call this function if infini is not available; in that
    case, it is silently ignored.

    Args:
        seed (int): The desired seed.
    """
    seed = int(seed)
    if _seeding_possible():
        for i in range(_C._device_count()):
            _default_generator(i).manual_seed(seed)


def seed() -> None:
    r"""Set the seed for generating random numbers to a random number for the current device.

    It's safe to call this function if infini is not available; in that
    case, it is silently ignored.

    .. warning::
        If you are working with a multi-device model, this function will only initialize
        the seed on one device.  To initialize all devices, use :func:`seed_all`.
    """
    if _seeding_possible():
        _default_generator(_C._current_device()).seed()


def seed_all() -> None:
    r"""Set the seed for generating random numbers to a random number on all devices.

    It's safe to call this function if infini is not available; in that
    case, it is silently ignored.
    """
    if not _seeding_possible():
        return
    # One random seed, shared by all devices (as torch.cuda.seed_all).
    random_seed = _default_generator(0).seed()
    for i in range(1, _C._device_count()):
        _default_generator(i).manual_seed(random_seed)


def initial_seed() -> int:
    r"""Return the current random seed of the current infini device."""
    return _default_generator(_C._current_device()).initial_seed()
