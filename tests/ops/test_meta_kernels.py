"""Meta functions PyTorch lacks, ours (torch_infini/_meta_kernels.py).

The Infini stack lays out each call's outputs by a meta run before queuing
it; an overload without a meta function was refused although InfiniOps
serves it. Each of ours must lay out what CPU's kernel allocates (shape,
dtype, strides: LAPACK's column-major ``geqrf``, ``out=`` arguments resized
as ATen resizes them), checked here against CPU on meta tensors, and must
not replace a meta function PyTorch has.
"""

from __future__ import annotations

import pytest
import torch

from torch_infini import _meta_kernels  # importing torch_infini registers them

aten = torch.ops.aten


def _meta(value):
    return value.to("meta") if isinstance(value, torch.Tensor) else value


def _empty(dtype=torch.float32):
    return torch.empty(0, dtype=dtype)


X = torch.randn(4, 5)
TARGET = torch.randint(0, 5, (4,))
POOLED = [2, 3, 2]
CASES = {
    "geqrf_tall": (aten.geqrf.default, (torch.randn(5, 3),), {}),
    "geqrf_wide_batched_float64": (aten.geqrf.default, (torch.randn(2, 3, 5).double(),), {}),
    "geqrf_empty": (aten.geqrf.default, (torch.randn(0, 3),), {}),
    "geqrf_out": (aten.geqrf.a, (torch.randn(5, 3),), {"a": _empty(), "tau": _empty()}),
    "logcumsumexp": (aten._logcumsumexp.default, (torch.randn(3, 4), 1), {}),
    "logcumsumexp_transposed": (aten._logcumsumexp.default, (torch.randn(4, 3).t(), 0), {}),
    "logcumsumexp_out": (aten._logcumsumexp.out, (torch.randn(3, 4), 0), {"out": _empty()}),
    "histogram_bin_ct": (aten.histogram.bin_ct, (torch.randn(10), 7), {}),
    "histogram_weighted_range": (aten.histogram.bin_ct, (torch.randn(10), 7),
                                 {"range": [-1.0, 1.0], "weight": torch.rand(10), "density": True}),
    "histogram_bins_tensor": (aten.histogram.bins_tensor, (torch.randn(2, 5), torch.tensor([-1.0, 0.0, 2.0])), {}),
    "histogram_bin_ct_out": (aten.histogram.bin_ct_out, (torch.randn(10), 7), {"hist": _empty(), "bin_edges": _empty()}),
    "histogram_bins_tensor_out": (aten.histogram.bins_tensor_out, (torch.randn(10), torch.tensor([-1.0, 0.0, 2.0])),
                                  {"hist": _empty(), "bin_edges": _empty()}),
    "lstsq_gels_wide": (aten.linalg_lstsq.default, (torch.randn(2, 3), torch.randn(2, 3)), {"driver": "gels"}),
    "lstsq_gels_tall_vector": (aten.linalg_lstsq.default, (torch.randn(2, 4, 3), torch.randn(2, 4)),
                               {"driver": "gels"}),
    "lstsq_gelsy_broadcast": (aten.linalg_lstsq.default, (torch.randn(2, 1, 4, 3), torch.randn(1, 3, 4, 2)), {}),
    "lstsq_gelsd_wide_float64": (aten.linalg_lstsq.default, (torch.randn(2, 3, 5).double(), torch.randn(2, 3, 2).double()),
                                 {"driver": "gelsd"}),
    "lstsq_gelss_square_transposed": (aten.linalg_lstsq.default, (torch.randn(3, 3).t(), torch.randn(3, 2)),
                                      {"driver": "gelss"}),
    "lstsq_out": (aten.linalg_lstsq.out, (torch.randn(4, 3), torch.randn(4, 2)),
                  {"driver": "gels", "solution": _empty(), "residuals": _empty(), "rank": _empty(torch.int64),
                   "singular_values": _empty()}),
    "multi_margin_loss_backward": (aten.multi_margin_loss_backward.default,
                                   (torch.randn(4), X, TARGET, 1, 1.0, None, 0), {}),
    "multi_margin_loss_backward_out": (aten.multi_margin_loss_backward.grad_input,
                                       (torch.tensor(1.0), X, TARGET, 2, 0.5, torch.rand(5), 1),
                                       {"grad_input": _empty()}),
    "adaptive_avg_pool3d_out": (aten.adaptive_avg_pool3d.out, (torch.randn(2, 3, 4, 5, 6), POOLED), {"out": _empty()}),
    "adaptive_avg_pool3d_out_channels_last": (
        aten.adaptive_avg_pool3d.out,
        (torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d), POOLED), {"out": _empty()}),
    "adaptive_avg_pool3d_backward_out": (aten.adaptive_avg_pool3d_backward.grad_input,
                                         (torch.randn(3, 2, 3, 2), torch.randn(3, 4, 5, 6)),
                                         {"grad_input": _empty()}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_meta_lays_out_what_cpu_allocates(case):
    overload, args, kwargs = CASES[case]
    expected = overload(*args, **{k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()})
    got = overload(*[_meta(a) for a in args], **{k: _meta(v) for k, v in kwargs.items()})
    expected = expected if isinstance(expected, tuple) else (expected,)
    got = got if isinstance(got, tuple) else (got,)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.device.type == "meta"
        assert (g.dtype, g.shape, g.stride()) == (e.dtype, e.shape, e.stride())


def test_every_overload_of_ours_has_a_meta_function_and_pytorchs_are_kept():
    """Ours are registered exactly where PyTorch has none (a PyTorch that
    gains one keeps its own)."""
    for name in _meta_kernels.META_KERNELS:
        assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "Meta"), name
    assert set(_meta_kernels.registered()) <= set(_meta_kernels.META_KERNELS)
    assert "aten::_adaptive_avg_pool3d" not in _meta_kernels.registered()


def test_a_meta_function_raises_cpus_error_for_a_bad_argument():
    with pytest.raises(RuntimeError, match="at least 2 dimensions"):
        aten.geqrf.default(torch.randn(3, device="meta"))
    with pytest.raises(RuntimeError, match="bins must be > 0"):
        aten.histogram.bin_ct(torch.randn(3, device="meta"), 0)


def test_lstsq_whose_residuals_depend_on_the_rank_has_no_layout():
    """gelss and gelsd compute the residuals of a tall system only for a full
    rank: no meta function can lay that out, so the call is refused (and
    runs only where a device computes it eagerly)."""
    with pytest.raises(NotImplementedError, match="depends on the rank"):
        aten.linalg_lstsq.default(torch.randn(4, 3, device="meta"), torch.randn(4, 2, device="meta"), driver="gelsd")
