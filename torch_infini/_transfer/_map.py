"""What every part of the CUDA-to-infini switch shares: which values name a
CUDA device, what they become, and the one record of every change made.

A value names CUDA when it is the string ``"cuda"`` or ``"cuda:N"`` or a
``torch.device`` of type ``cuda``; it becomes ``"infini"``/``"infini:N"`` (a
string stays a string, a device a device, so the callee sees the kind of value
it was given). Nothing else is touched: ``"cudagraphs"``, a path that happens
to start with ``cuda``, an ``int`` index, an infini or CPU device all pass
through unchanged.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable, Iterable

import torch

#: The device type everything CUDA-named becomes.
TARGET = "infini"

#: Keyword arguments that hold a device (or a device type) wherever PyTorch
#: takes one: factories, ``.to``, autocast, ``torch.load``, c10d, DataLoader.
DEVICE_KEYWORDS = ("device", "device_type", "map_location", "device_id", "pin_memory_device")


def names_cuda(value: Any) -> bool:
    """Whether ``value`` is ``"cuda"``, ``"cuda:N"`` or a CUDA ``torch.device``."""
    if isinstance(value, str):
        return value == "cuda" or (value.startswith("cuda:") and value[5:].isdigit())
    return isinstance(value, torch.device) and value.type == "cuda"


def to_infini(value: Any) -> Any:
    """``value`` with its CUDA device named as the infini device of the same
    index; anything that does not name CUDA is returned as it is."""
    if isinstance(value, str):
        return TARGET + value[4:] if names_cuda(value) else value
    if isinstance(value, torch.device) and value.type == "cuda":
        return torch.device(TARGET, value.index) if value.index is not None else torch.device(TARGET)
    return value


def map_arguments(args: tuple, kwargs: dict, positional: bool = True) -> tuple[tuple, dict]:
    """``args`` and ``kwargs`` with CUDA devices mapped: every positional
    argument (when ``positional``) and the keywords of :data:`DEVICE_KEYWORDS`.

    A positional string is mapped only when it is exactly ``"cuda"`` or
    ``"cuda:N"``, which no PyTorch API takes as anything but a device."""
    if positional:
        for a in args:
            if names_cuda(a):
                args = tuple(to_infini(a) for a in args)
                break
    if kwargs:
        for key in DEVICE_KEYWORDS:
            if key in kwargs and names_cuda(kwargs[key]):
                kwargs = dict(kwargs)
                kwargs[key] = to_infini(kwargs[key])
    return args, kwargs


def mapping_devices(fn: Callable, positional: bool = True) -> Callable:
    """``fn`` with CUDA devices in its arguments mapped (see :func:`map_arguments`)."""

    @functools.wraps(fn)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        args, kwargs = map_arguments(args, kwargs, positional)
        return fn(*args, **kwargs)

    return mapped


@dataclass(frozen=True)
class Change:
    """One thing the switch changed: ``target`` (``"torch.zeros"``), what it
    does now, and the ``area`` of the documented list it belongs to."""

    target: str
    what: str
    area: str


#: Every change made, in the order made (``torch_infini.transfer_to_infini.changes()``).
CHANGES: list[Change] = []


#: How to undo each change: (owner, name, the value before, or _ABSENT).
_UNDO: list[tuple[Any, str, Any]] = []
_ABSENT = object()


def replace(owner: Any, name: str, new: Any, label: str, what: str, area: str) -> None:
    """Set ``owner.name`` to ``new`` and record it under ``label``."""
    _UNDO.append((owner, name, vars(owner).get(name, _ABSENT) if hasattr(owner, "__dict__") else _ABSENT))
    setattr(owner, name, new)
    CHANGES.append(Change(label, what, area))


def remove(owner: Any, name: str) -> None:
    """Delete ``owner.name`` (undone by :func:`undo_all` like a replacement)."""
    if name in vars(owner):
        _UNDO.append((owner, name, vars(owner)[name]))
        delattr(owner, name)


def undo_all() -> None:
    """Restore everything :func:`replace` changed, newest first (used only when
    turning the switch on fails halfway: PyTorch is left as it was)."""
    while _UNDO:
        owner, name, before = _UNDO.pop()
        if before is _ABSENT:
            try:
                delattr(owner, name)
            except AttributeError:
                pass
        else:
            setattr(owner, name, before)
    CHANGES.clear()


def wrap_each(owner: Any, names: Iterable[str], prefix: str, area: str) -> None:
    """Replace each ``owner.name`` by its device-mapping form."""
    for name in names:
        replace(owner, name, mapping_devices(getattr(owner, name)), f"{prefix}.{name}",
                "device arguments naming cuda become infini", area)
