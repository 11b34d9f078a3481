"""PyTorch's device-backend autoload hook for torch_infini.

``pyproject.toml`` declares ``load`` under the ``torch.backends`` entry-point
group, so ``import torch`` imports torch_infini and the ``infini`` device is
there without ``import torch_infini`` (``TORCH_DEVICE_BACKEND_AUTOLOAD=0``
turns that off, as for every PyTorch backend).

This module sits outside the package on purpose: PyTorch turns any exception
from an autoload hook into a failure of ``import torch`` itself, and a
torch_infini that cannot load (built for another PyTorch, a missing InfiniRT
library) must not take PyTorch down with it, nor the pip build that would fix
it. Here a failure is a warning; ``import torch_infini`` then raises the
error itself, and ``python -m torch_infini`` explains it.
"""

from __future__ import annotations

import warnings


def load() -> None:
    """Import torch_infini (registering the infini device); warn if it cannot be imported."""
    try:
        import torch_infini  # noqa: F401
    except Exception as error:  # noqa: BLE001  (anything: PyTorch must still import)
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
        warnings.warn(
            f"torch_infini could not be loaded, so the infini device is not available "
            f"({type(error).__name__}: {first_line}). Run `python -m torch_infini` for "
            "the cause and its fix; set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to skip loading it.",
            RuntimeWarning,
            stacklevel=2,
        )
