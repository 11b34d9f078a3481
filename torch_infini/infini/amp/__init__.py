"""torch.infini.amp: mixed precision on infini, as torch.cuda.amp.

``torch.autocast("infini", dtype=torch.float16 | torch.bfloat16)`` applies
CUDA's op policy (see csrc/amp/autocast_policy.cpp): matmul-like ops and
convolutions in the lower precision, ops that need range (exp, log, pow,
norms, softmax, reductions, losses) in float32, mixed inputs of a few ops
promoted to the widest type, everything else in its inputs' dtype.
``autocast`` and ``GradScaler`` here are the device-bound forms of
``torch.amp.autocast`` and ``torch.amp.GradScaler`` (not deprecated: they are
this package's spelling, not a legacy alias).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

__all__ = ["autocast", "custom_bwd", "custom_fwd", "GradScaler", "get_amp_supported_dtype"]


def get_amp_supported_dtype() -> list[torch.dtype]:
    r"""The dtypes ``torch.autocast("infini", dtype=...)`` accepts, as for CUDA:
    ``float16`` and ``bfloat16`` (lower precision) and ``float32``.

    torch.autocast asks the device module for this function
    (``torch.infini.get_amp_supported_dtype``)."""
    return [torch.float16, torch.bfloat16, torch.float32]


class autocast(torch.amp.autocast_mode.autocast):
    r"""``torch.autocast("infini", ...)``. See :class:`torch.autocast`.

    Args:
        enabled (bool): whether autocasting is on in the region. Default: ``True``.
        dtype (torch.dtype): the lower precision, ``torch.float16`` (default) or
            ``torch.bfloat16``.
        cache_enabled (bool): whether casts of float32 leaf parameters are
            cached inside the region. Default: ``True``.
    """

    def __init__(self, enabled: bool = True, dtype: torch.dtype = torch.float16, cache_enabled: bool = True) -> None:
        super().__init__("infini", enabled=enabled, dtype=dtype, cache_enabled=cache_enabled)

    def __enter__(self) -> None:
        return super().__enter__()

    def __exit__(self, exc_type: Any, exc_val: Any, exc_tb: Any) -> None:  # type: ignore[override]
        return super().__exit__(exc_type, exc_val, exc_tb)

    def __call__(self, func):
        return super().__call__(func)


class GradScaler(torch.amp.GradScaler):
    r"""``torch.amp.GradScaler("infini", ...)``. See :class:`torch.amp.GradScaler`.

    Unscaling and the scale update run the ``_amp_foreach_non_finite_check_and_unscale_``
    and ``_amp_update_scale_`` kernels on the device; where the build has none,
    they raise ``NotImplementedError`` naming the operator.
    """

    def __init__(
        self,
        init_scale: float = 2.0**16,
        growth_factor: float = 2.0,
        backoff_factor: float = 0.5,
        growth_interval: int = 2000,
        enabled: bool = True,
    ) -> None:
        super().__init__(
            "infini",
            init_scale=init_scale,
            growth_factor=growth_factor,
            backoff_factor=backoff_factor,
            growth_interval=growth_interval,
            enabled=enabled,
        )


def custom_fwd(fwd: Optional[Callable] = None, *, cast_inputs: Optional[torch.dtype] = None) -> Callable:
    r"""``torch.amp.custom_fwd(..., device_type="infini")``, as ``torch.cuda.amp.custom_fwd``.

    Decorates the ``forward`` of a custom ``torch.autograd.Function``: inside
    an infini autocast region, ``cast_inputs`` (a floating dtype) casts its
    floating-point infini tensor arguments to that dtype and runs ``forward``
    with autocast off; without ``cast_inputs`` it runs under the surrounding
    autocast state, which ``custom_bwd`` then restores for ``backward``.
    (Unlike CUDA's, this spelling is not deprecated: it is this package's.)
    """
    return torch.amp.custom_fwd(fwd, device_type="infini", cast_inputs=cast_inputs)


def custom_bwd(bwd: Callable) -> Callable:
    r"""``torch.amp.custom_bwd(..., device_type="infini")``, as ``torch.cuda.amp.custom_bwd``.

    Decorates the ``backward`` of a custom ``torch.autograd.Function`` whose
    ``forward`` carries ``custom_fwd``: ``backward`` runs under the autocast
    state ``forward`` ran with.
    """
    return torch.amp.custom_bwd(bwd, device_type="infini")
