"""Which InfiniOps implementation of an operator is faster, per backend, operator and size.

InfiniOps built ``WITH_TORCH=ON`` has two implementations of some operators
on a backend: its native kernel and an ATen-backed one (ATen's kernel run
over the device's memory: the generated index 8, and the hand-written ones
of ``Add`` and ``Gemm``). On InfiniRT's CPU backend the native kernels ran
10-30x slower than ATen's at 1Mi elements. The Infini provider's choice
(``csrc/runtime/infini/implementation_choice.h``) tries the faster kind
first, where it was measured, and the other where the build lacks it or the
call is beyond its limits.

What is faster is data, measured by ``benchmarks/implementations.py``
(``--write`` refreshes it) and kept in ``data/implementation_speed.json``;
it is set in the extension when torch_infini is imported. The host runtime
ignores it. A native answer names the output dtypes it holds for (its
``dtypes``): those where the native kernel gives CPU eager's results bit for
bit, as the benchmark checks; an output of another dtype takes the
backend's default.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

DATA = Path(__file__).resolve().parent / "data" / "implementation_speed.json"
FORMAT = 1
KINDS = ("native", "aten")

#: One preference as the extension takes it: (backend, InfiniOps operator or
#: "*", the size class's bound (elements; -1: any size), "native" | "aten",
#: the output dtypes it is limited to (torch's names; empty: every dtype)).
Row = tuple[str, str, int, str, tuple[str, ...]]


def _dtypes(where: str, names: Any) -> tuple[str, ...]:
    """A size class's ``dtypes``, checked: torch's names of dtypes."""
    import torch

    if names is None:
        return ()
    if not isinstance(names, list) or not all(
            isinstance(n, str) and str(getattr(torch, n, None)) == f"torch.{n}" for n in names):
        raise ValueError(f"implementation data: {where}: dtypes {names!r} must be a list of torch's dtype names "
                         "('float32', 'int64', ...)")
    return tuple(sorted(names))


def rows(data: dict[str, Any]) -> list[Row]:
    """The preferences of a data file's contents, checked: each backend's
    ``default`` (operator "*"), then its operators' size classes in order.
    Raises ``ValueError`` naming what is malformed."""
    if data.get("format") != FORMAT:
        raise ValueError(f"implementation data: format {data.get('format')!r}, expected {FORMAT}")
    out: list[Row] = []
    for backend, entry in sorted(data.get("backends", {}).items()):
        default = entry.get("default")
        if default is not None:
            if default not in KINDS:
                raise ValueError(f"implementation data: {backend} default {default!r} is not one of {KINDS}")
            out.append((backend, "*", -1, default, ()))
        for op, classes in sorted(entry.get("operators", {}).items()):
            previous = 0
            for i, size_class in enumerate(classes):
                below, faster = size_class.get("below"), size_class.get("faster")
                if faster not in KINDS:
                    raise ValueError(f"implementation data: {backend} {op}: faster {faster!r} is not one of {KINDS}")
                last = i == len(classes) - 1
                if (below is None) != last or (below is not None and (not isinstance(below, int) or below <= previous)):
                    raise ValueError(f"implementation data: {backend} {op}: size classes must have increasing "
                                     "'below' bounds and end with one of any size ('below': null)")
                previous = below or previous
                out.append((backend, op, -1 if below is None else below, faster,
                            _dtypes(f"{backend} {op}", size_class.get("dtypes"))))
    return out


def load(path: Path = DATA) -> dict[str, Any]:
    """The data file's contents."""
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def install(path: Optional[Path] = None) -> None:
    """Sets the preferences of ``path`` (default: the measured data shipped
    with torch_infini) in the extension."""
    from . import _C

    _C._set_implementation_preferences(rows(load(path or DATA)))


def current() -> list[Row]:
    """The preferences the extension holds now."""
    from . import _C

    return [(*r[:4], tuple(sorted(r[4]))) for r in _C._implementation_preferences()]  # type: ignore[misc]
