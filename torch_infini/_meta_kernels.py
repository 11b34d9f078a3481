"""Meta functions PyTorch lacks, for overloads InfiniOps serves.

The Infini stack lays out every call's outputs by a run on meta tensors
before queuing it (``csrc/ops/aten/aten_meta.cpp``). PyTorch 2.13 has no
meta function for a few overloads whose outputs' shapes depend only on the
arguments' metadata; InfiniOps serves them (ATen-backed), so without one they
were refused. Each function here lays out what CPU's kernel allocates:
shape, dtype and strides (``tests/ops/test_meta_kernels.py`` compares each
with CPU). Argument errors are CPU's: where a meta function here accepts a
call CPU refuses, the kernel raises CPU's error when it runs.

Registered at ``import torch_infini`` only where PyTorch has no meta
function of its own (a later PyTorch's takes precedence), into the ``Meta``
key every meta tensor uses, so fake tensors and ``torch.compile`` see them
too.
"""

from __future__ import annotations

from typing import Callable

import torch

_registered: list[str] = []
_library: torch.library.Library | None = None


def _resize_out(out: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    """``out`` as ATen's ``resize_output`` leaves it for a result laid out as
    ``like``: unchanged where its shape is right, else resized and given
    ``like``'s strides."""
    if out.shape != like.shape:
        # Enough elements for like's strides (a view of a larger buffer spans more than its numel).
        span = 1 + sum((size - 1) * stride for size, stride in zip(like.shape, like.stride())) if like.numel() else 0
        out.resize_(span)
        out.as_strided_(like.shape, like.stride())
    return out


def _out_of(functional: Callable[..., object], *outs: str) -> Callable[..., object]:
    """The meta function of an ``out=`` overload whose functional overload's
    meta function is ``functional``: each out argument (named ``outs``, in
    the results' order) resized as ATen's ``resize_output`` does."""
    def meta(*args: object, **kwargs: torch.Tensor) -> object:
        given = [kwargs.pop(name) for name in outs]
        results = functional(*args, **kwargs)
        results = results if isinstance(results, tuple) else (results,)
        written = tuple(_resize_out(out, like) for out, like in zip(given, results))
        return written if len(written) > 1 else written[0]
    return meta


def _logcumsumexp(self: torch.Tensor, dim: int) -> torch.Tensor:
    """CPU's ``_logcumsumexp``: a contiguous tensor of ``self``'s shape."""
    torch._check(self.dtype.is_floating_point or self.dtype.is_complex,
                 lambda: f"logcumsumexp(): expected floating point or complex dtype, got {self.dtype}")
    rank = max(self.dim(), 1)
    torch._check_index(-rank <= dim < rank, lambda: f"Dimension out of range (expected to be in range of "
                                                    f"[{-rank}, {rank - 1}], but got {dim})")
    return torch.empty_like(self, memory_format=torch.contiguous_format)



def _geqrf(self: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """CPU's ``geqrf``: ``a`` of ``self``'s shape in LAPACK's column-major
    order per matrix, ``tau`` of ``(*, min(m, n))``, contiguous."""
    torch._check(self.dim() >= 2, lambda: "torch.geqrf: input must have at least 2 dimensions.")
    torch._check(self.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128),
                 lambda: f"torch.geqrf: Expected a floating point or complex tensor as input. Got {self.dtype}")
    *batch, m, n = self.shape
    a = torch.empty(*batch, n, m, dtype=self.dtype, device=self.device).transpose(-2, -1)
    tau = torch.empty(*batch, min(m, n), dtype=self.dtype, device=self.device)
    return a, tau



def _histogram_of(self: torch.Tensor, edges: int, weight: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    torch._check(self.dtype.is_floating_point,
                 lambda: f"torch.histogram: input tensor and bins tensors should have the same dtype, "
                         f"but got input {self.dtype}")
    torch._check(weight is None or weight.shape == self.shape,
                 lambda: "torch.histogram: if weight tensor is provided it should have the same shape as the "
                         "input tensor excluding its innermost dimension")
    hist = torch.empty(max(edges - 1, 0), dtype=self.dtype, device=self.device)
    return hist, torch.empty(edges, dtype=self.dtype, device=self.device)


def _histogram_bin_ct(self: torch.Tensor, bins: int = 100, *, range: list[float] | None = None,
                      weight: torch.Tensor | None = None, density: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """CPU's ``histogram.bin_ct``: ``bins`` counts and ``bins + 1`` edges."""
    torch._check(bins > 0, lambda: f"torch.histogram(): bins must be > 0, but got {bins} for dimension 0")
    return _histogram_of(self, bins + 1, weight)



def _histogram_bins_tensor(self: torch.Tensor, bins: torch.Tensor, *, weight: torch.Tensor | None = None,
                           density: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """CPU's ``histogram.bins_tensor``: one count fewer than the edges given."""
    torch._check(bins.dim() == 1, lambda: f"torch.histogram(): bins tensor should have one dimension, but got "
                                          f"{bins.dim()} dimensions in the bins tensor for dimension 0")
    torch._check(bins.numel() > 0, lambda: "torch.histogram(): bins tensor should have at least 1 element, but "
                                           "got 0 elements in the bins tensor for dimension 0")
    torch._check(bins.dtype == self.dtype, lambda: "torch.histogram: input tensor and bins tensors should have the "
                                                   f"same dtype, but got input {self.dtype} and bins {bins.dtype}")
    return _histogram_of(self, bins.numel(), weight)



def _linalg_lstsq(self: torch.Tensor, b: torch.Tensor, rcond: float | None = None, *,
                  driver: str | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """CPU's ``linalg_lstsq``: the solution a view of LAPACK's column-major
    ``(*, max(m, n), k)`` buffer; the residuals ``(*, k)`` where the
    driver computes them (``m > n``, not ``gelsy``), the rank (not for
    ``gels``) and singular values (``gelss``/``gelsd``). ``gelss`` and
    ``gelsd`` compute the residuals only for a full rank, which only the
    values tell: such a call (``m > n``) has no layout before it runs."""
    driver = driver or "gelsy"
    torch._check(driver in ("gels", "gelsy", "gelsd", "gelss"),
                 lambda: "torch.linalg.lstsq: parameter `driver` should be one of (gels, gelsy, gelsd, gelss)")
    torch._check(self.dim() >= 2, lambda: "torch.linalg.lstsq: input must have at least 2 dimensions.")
    torch._check(self.dtype in (torch.float32, torch.float64, torch.complex64, torch.complex128),
                 lambda: f"torch.linalg.lstsq: Expected a floating point or complex tensor as input. Got {self.dtype}")
    # ATen's linalg_solve_is_vector_rhs: b of the input's shape without its last dimension.
    vector = b.dim() == 1 or (b.dim() == self.dim() - 1 and b.shape == self.shape[:-1])
    rhs = b.unsqueeze(-1) if vector else b
    m, n = self.shape[-2], self.shape[-1]
    torch._check(rhs.shape[-2] == m, lambda: "torch.linalg.lstsq: input.size(-2) should match other.size(-2)")
    batch = list(torch.broadcast_shapes(tuple(self.shape[:-2]), tuple(rhs.shape[:-2])))
    k, rows = rhs.shape[-1], max(m, n)
    real = self.real.dtype if self.is_complex() else self.dtype
    if m > n and driver in ("gelss", "gelsd"):
        raise NotImplementedError(f"torch.linalg.lstsq (driver {driver}, more rows than columns): whether the "
                                  "residuals are computed depends on the rank, known only once it has run")
    solution = torch.empty(*batch, k, rows, dtype=self.dtype, device=self.device).transpose(-2, -1).narrow(-2, 0, n)
    if vector:
        solution = solution.squeeze(-1)
    empty = torch.empty(0, dtype=real, device=self.device)
    residuals = torch.empty(*batch, k, dtype=real, device=self.device) if m > n and driver == "gels" else empty
    # The rank and singular values are the input's, of its own batch (not broadcast with b's).
    rank = (torch.empty(0, dtype=torch.int64, device=self.device) if driver == "gels"
            else torch.empty(self.shape[:-2], dtype=torch.int64, device=self.device))
    singular_values = (torch.empty(*self.shape[:-2], min(m, n), dtype=real, device=self.device)
                       if driver in ("gelss", "gelsd") else empty.clone())
    return solution, residuals, rank, singular_values


def _multi_margin_loss_backward(grad_output: torch.Tensor, self: torch.Tensor, target: torch.Tensor, p: float,
                                margin: float, weight: torch.Tensor | None = None,
                                reduction: int = 1) -> torch.Tensor:
    """CPU's ``multi_margin_loss_backward``: a contiguous gradient of
    ``self``'s shape."""
    return torch.empty_like(self, memory_format=torch.contiguous_format)




#: Qualified overload name -> meta function.
META_KERNELS: dict[str, Callable[..., object]] = {
    "aten::_logcumsumexp": _logcumsumexp,
    "aten::_logcumsumexp.out": _out_of(_logcumsumexp, "out"),
    "aten::geqrf": _geqrf,
    "aten::geqrf.a": _out_of(_geqrf, "a", "tau"),
    "aten::histogram.bin_ct": _histogram_bin_ct,
    "aten::histogram.bin_ct_out": _out_of(_histogram_bin_ct, "hist", "bin_edges"),
    "aten::histogram.bins_tensor": _histogram_bins_tensor,
    "aten::histogram.bins_tensor_out": _out_of(_histogram_bins_tensor, "hist", "bin_edges"),
    "aten::linalg_lstsq": _linalg_lstsq,
    "aten::linalg_lstsq.out": _out_of(_linalg_lstsq, "solution", "residuals", "rank", "singular_values"),
    "aten::multi_margin_loss_backward": _multi_margin_loss_backward,
    "aten::multi_margin_loss_backward.grad_input": _out_of(_multi_margin_loss_backward, "grad_input"),
    # Laid out as the functional overloads (which have meta functions): ATen's
    # kernels of both are one.
    "aten::adaptive_avg_pool3d.out": _out_of(torch.ops.aten._adaptive_avg_pool3d.default, "out"),
    "aten::adaptive_avg_pool3d_backward.grad_input": _out_of(torch.ops.aten._adaptive_avg_pool3d_backward.default,
                                                             "grad_input"),
}


def install() -> list[str]:
    """Registers every function of :data:`META_KERNELS` whose overload has no
    meta function; returns the names registered (once per process)."""
    global _library
    if _library is not None:
        return list(_registered)
    _library = torch.library.Library("aten", "IMPL")
    for name, fn in META_KERNELS.items():
        if not torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta"):
            _library.impl(name.split("::", 1)[1], fn, "Meta")
            _registered.append(name)
    return list(_registered)


def registered() -> list[str]:
    """The overloads whose meta function is ours."""
    return list(_registered)
