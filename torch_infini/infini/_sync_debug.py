"""``torch.infini.set_sync_debug_mode`` and ``get_sync_debug_mode``, with
``torch.cuda``'s meaning: report the operations that make the host wait for
the device where CUDA's would (a blocking copy to or from the host,
``.item()``, ``nonzero`` and the other operators whose result's shape
depends on the data)."""

from __future__ import annotations

from .. import _C

_MODES = {"default": 0, "warn": 1, "error": 2}


def set_sync_debug_mode(debug_mode: int | str) -> None:
    r"""Set the debug mode for infini synchronizing operations.

    Args:
        debug_mode(str or int): if "default" or 0, don't error or warn on synchronizing operations,
            if "warn" or 1, warn on synchronizing operations, if "error" or 2, error out synchronizing operations.

    Warning:
        This is an experimental feature, and not all synchronizing operations will trigger warning or error.
        torch-infini's own waits (the host runtime's first call of each kind of call) are not reported: they
        are not the program's, and a CUDA program would not wait there.
    """
    if isinstance(debug_mode, str):
        if debug_mode not in _MODES:
            raise RuntimeError('invalid value of debug_mode, expected one of "default", "warn", "error"')
        debug_mode = _MODES[debug_mode]
    _C._set_sync_debug_mode(debug_mode)


def get_sync_debug_mode() -> int:
    r"""Return current value of debug mode for infini synchronizing operations."""
    return _C._get_sync_debug_mode()
