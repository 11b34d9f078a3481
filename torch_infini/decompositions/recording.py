"""The operator calls of a decomposition's first run, for its replay without Python.

A decomposition is Python code around a handful of operator calls; the
kernel (``csrc/ops/aten/decomposition_replay.h``) records them on the first
run of a call's key and replays them from C++ on every later call of that
key. :class:`Recorder` sees each call at the dispatcher, as PyTorch's
``TorchDispatchMode`` shows it, with its arguments and results; the kernel
decides whether the sequence may be replayed (no value read back into
Python, no data-dependent shape, no tensor from elsewhere).

PyTorch's primitives (``prims.*``) are recorded as the ATen calls they are
implemented by, after their meta function's checks: a primitive's own
dispatch is Python too.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

_LIFT_FRESH = torch.ops.aten.lift_fresh.default


class Recorder(TorchDispatchMode):
    """Records ``(overload, args, kwargs, out)`` for each operator call made
    while it is active (not the calls those make: the mode is off inside
    its own handler)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Any, tuple, dict, Any]] = []

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        impl = getattr(func, "impl_aten", None) if func.namespace == "prims" else None
        if impl is not None:
            func.prim_meta_impl(*args, **kwargs)
            with self:
                return impl(*args, **kwargs)
        out = func(*args, **kwargs)
        if func is _LIFT_FRESH:
            # torch.tensor(...)'s new tensor: its values as made, before a
            # later call may write it (the replay gives a copy of them).
            args = (args[0].clone(),)
        self.calls.append((func, args, kwargs, out))
        return out


def run_recorded(fn: Callable[[], Any]) -> tuple[Any, list, str]:
    """``fn()``'s result, the calls it made, and why they may not be
    replayed (empty where they may): a run that warned is not replayed,
    since the replay would not warn. Its warnings are issued again, as
    they were caught."""
    recorder = Recorder()
    caught: list[warnings.WarningMessage] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with recorder:
                result = fn()
    finally:
        for w in caught:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source)
    why_not = f"it warned: {caught[0].message}" if caught else ""
    return result, recorder.calls, why_not
