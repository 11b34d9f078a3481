"""What the provider serves with kernels of its own: decompositions that
choose between two ways of computing a result ask it."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=None)
def has_kernel(name: str, overload: str) -> bool:
    """Whether the provider runs overload (``"aten::amin"``, ``"out"``) on a
    kernel of its own, not as a decomposition, for some calls (fixed once
    the provider has started: nothing can make this answer stale)."""
    from torch_infini import _C

    return _C._provider_has_kernel(name, overload)


def serves(*overloads: str) -> bool:
    """Whether the provider has kernels of its own for every overload
    (``"aten::amin.out"``): a decomposition calling only those runs as that
    many calls, where PyTorch's may make several times as many."""
    return all(has_kernel(*(o.split(".", 1) if "." in o else (o, ""))) for o in overloads)
