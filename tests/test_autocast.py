"""torch.autocast("infini"): CUDA's op policy, checked two ways.

* The registrations: every operator with an AutocastCUDA kernel has an
  AutocastPrivateUse1 one (except cuDNN's own convolutions), nothing more.
* The behaviour: output dtypes per policy class under float16 and bfloat16,
  against the table in PyTorch's AMP documentation ("CUDA Ops that can
  autocast to float16", "... to float32", "... promote to the widest input
  type"; everything else runs in its inputs' dtype).

Autocast only casts and redispatches; the kernels underneath are the
device's. Cases whose kernels belong to the native-operator work (mm, addmm,
bmm, softmax, sum, exp, ...) skip until those kernels exist, unless the
opt-in CPU fallback is on (TORCH_INFINI_CPU_FALLBACK=1). Cases on operators
nobody is making native yet (addr, prelu, group_norm, losses, ...) run with
the fallback turned on inside the test.
"""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_infini
from infini_testing import needs_kernels, unserved_skips

DEV = torch.device("infini:0")
LOW = (torch.float16, torch.bfloat16)


def t(*shape, dtype=torch.float32):
    g = torch.Generator().manual_seed(sum(shape))
    return (torch.rand(*shape, generator=g, dtype=torch.float32) + 0.5).to(dtype).to(DEV)


# name -> (fn() -> output tensor, policy, ops whose infini kernels the case
# needs (skipped without them), or None: run with the CPU fallback on).
# Each fn takes the autocast dtype `h`, the low-precision dtype of its
# low-precision inputs (CUDA's promotion refuses float16 inputs under a
# bfloat16 region and vice versa). Policies: "low" = the autocast dtype,
# "fp32", "widest" = float32 (the inputs are float32 and `h`), "keep32" /
# "keep_low" = the inputs' dtype (no policy).
CASES = {
    # lower_precision_fp
    "mm": (lambda h: torch.mm(t(4, 5), t(5, 3)), "low", ["aten::mm"]),
    "addmm": (lambda h: torch.addmm(t(4, 3), t(4, 5), t(5, 3)), "low", ["aten::addmm"]),
    "bmm": (lambda h: torch.bmm(t(2, 4, 5), t(2, 5, 3)), "low", ["aten::bmm"]),
    "matmul": (lambda h: t(4, 5) @ t(5, 3), "low", ["aten::mm"]),
    "linear": (lambda h: F.linear(t(4, 5), t(3, 5), t(3)), "low", ["aten::addmm"]),
    "baddbmm": (lambda h: torch.baddbmm(t(2, 4, 3), t(2, 4, 5), t(2, 5, 3)), "low", None),
    "addbmm": (lambda h: torch.addbmm(t(4, 3), t(2, 4, 5), t(2, 5, 3)), "low", None),
    "addmv": (lambda h: torch.addmv(t(4), t(4, 5), t(5)), "low", None),
    "addr": (lambda h: torch.addr(t(4, 3), t(4), t(3)), "low", None),
    "mv": (lambda h: torch.mv(t(4, 5), t(5)), "low", None),
    "chain_matmul": (lambda h: torch.linalg.multi_dot([t(4, 5), t(5, 3), t(3, 2)]), "low", None),
    "prelu": (lambda h: F.prelu(t(2, 3), t(1)), "low", None),
    # fp32
    "exp": (lambda h: torch.exp(t(8, dtype=h)), "fp32", ["aten::exp"]),
    "pow": (lambda h: torch.pow(t(8, dtype=h), 2.0), "fp32", ["aten::pow.Tensor_Scalar"]),
    "layer_norm": (lambda h: F.layer_norm(t(2, 8, dtype=h), (8,)), "fp32", ["aten::native_layer_norm"]),
    "log": (lambda h: torch.log(t(8, dtype=h)), "fp32", None),
    "rsqrt": (lambda h: torch.rsqrt(t(8, dtype=h)), "fp32", None),
    "acos": (lambda h: torch.acos(torch.rand(8).to(h).to(DEV)), "fp32", None),
    "softplus": (lambda h: F.softplus(t(8, dtype=h)), "fp32", None),
    "group_norm": (lambda h: F.group_norm(t(2, 4, 3, dtype=h), 2), "fp32", None),
    "mse_loss": (lambda h: F.mse_loss(t(8, dtype=h), t(8, dtype=h)), "fp32", None),
    "l1_loss": (lambda h: F.l1_loss(t(8, dtype=h), t(8, dtype=h)), "fp32", None),
    "nll_loss": (lambda h: F.nll_loss(t(4, 3, dtype=h), torch.tensor([0, 2, 1, 0]).to(DEV)), "fp32", None),
    "bce_with_logits": (
        lambda h: F.binary_cross_entropy_with_logits(t(6, dtype=h), torch.rand(6).to(h).to(DEV)),
        "fp32", None),
    "logsumexp": (lambda h: torch.logsumexp(t(4, 3, dtype=h), 1), "fp32", None),
    "norm": (lambda h: torch.norm(t(8, dtype=h)), "fp32", None),  # fp32_append_dtype
    # fp32_set_opt_dtype
    "softmax": (lambda h: torch.softmax(t(4, 3, dtype=h), 1), "fp32", ["aten::_softmax"]),
    "log_softmax": (lambda h: torch.log_softmax(t(4, 3, dtype=h), 1), "fp32", ["aten::_log_softmax"]),
    "sum": (lambda h: torch.sum(t(4, 3, dtype=h)), "fp32", ["aten::sum.dim_IntList"]),
    "sum_dim": (lambda h: torch.sum(t(4, 3, dtype=h), 1), "fp32", ["aten::sum.dim_IntList"]),
    "cumsum": (lambda h: torch.cumsum(t(4, 3, dtype=h), 1), "fp32", None),
    "prod": (lambda h: torch.prod(t(4, dtype=h)), "fp32", None),
    # promote
    "dot": (lambda h: torch.dot(t(5), t(5, dtype=h)), "widest", None),
    "addcmul": (lambda h: torch.addcmul(t(5), t(5, dtype=h), t(5, dtype=h)), "widest", None),
    "tensordot": (lambda h: torch.tensordot(t(3, 4), t(4, 2, dtype=h), dims=1), "widest", None),
    "scatter_add": (
        lambda h: torch.scatter_add(t(5, dtype=h), 0, torch.tensor([0, 1]).to(DEV), t(2)),
        "widest", None),
    # no policy: the inputs' dtype
    "add_fp32": (lambda h: t(5) + t(5), "keep32", []),
    "relu_low": (lambda h: torch.relu(t(5, dtype=h)), "keep_low", None),
}


def expected(policy: str, low: torch.dtype) -> torch.dtype:
    return {"low": low, "fp32": torch.float32, "widest": torch.float32,
            "keep32": torch.float32, "keep_low": low}[policy]


@pytest.mark.parametrize("low", LOW, ids=["float16", "bfloat16"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_output_dtype_follows_cuda_policy(name, low):
    fn, policy, kernels = CASES[name]
    if kernels is not None:
        needs_kernels(*kernels)
        context = contextlib.nullcontext()
    else:
        context = torch_infini.fallback.enabled()
    with context, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the fallback's once-per-operator notice
        with torch.autocast("infini", dtype=low):
            # On the Infini stack InfiniOps serves some calls of these ops
            # and refuses the others, naming its kernel: those skip.
            out = unserved_skips(lambda: fn(low))
    assert out.device.type == "infini"
    assert out.dtype == expected(policy, low), f"{name}: {policy}"


def test_registrations_are_cudas():
    cuda = set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastCUDA"))
    infini = set(torch._C._dispatch_get_registrations_for_dispatch_key("AutocastPrivateUse1"))
    # cuDNN's own operators have no infini kernel to cast for. _cudnn_rnn's
    # autocast kernel is compiled into CUDA builds of PyTorch only.
    cudnn = {"aten::cudnn_convolution", "aten::cudnn_convolution_transpose"}
    assert cudnn <= cuda - infini <= cudnn | {"aten::_cudnn_rnn"}
    assert infini - cuda == set()
    for op in ("aten::mm", "aten::conv2d", "aten::softmax.int", "aten::layer_norm",
               "aten::norm.Scalar", "aten::dot", "aten::binary_cross_entropy"):
        assert op in infini


def test_binary_cross_entropy_is_refused_under_autocast():
    with torch.autocast("infini", dtype=torch.float16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(torch.rand(3).to(DEV), torch.rand(3).to(DEV))


def test_explicit_dtype_is_kept():
    needs_kernels("aten::sum.dim_IntList")
    with torch.autocast("infini", dtype=torch.float16):
        out = unserved_skips(lambda: torch.sum(t(4, dtype=torch.float16), dtype=torch.float64))
        assert out.dtype == torch.float64


def test_cpu_tensors_are_not_cast_by_infini_autocast():
    with torch.autocast("infini", dtype=torch.float16):
        assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.float32


@pytest.mark.parametrize("op", ["mm", "linear", "conv1d"])
def test_infini_tensors_are_not_cast_by_cpu_autocast(op):
    # The mirror of the test above, as CUDA has it: torch.autocast("cpu")
    # leaves a CUDA call alone. On the host runtime the CPU kernel run for an
    # infini call must not see the caller's CPU autocast either (its first
    # call, run directly, once returned bfloat16 and left its kind's later
    # calls failing at the next synchronization).
    needs_kernels({"mm": "aten::mm", "linear": "aten::addmm", "conv1d": "aten::convolution_overrideable"}[op])
    call = {
        "mm": lambda a: torch.mm(a, a),
        "linear": lambda a: F.linear(a, a, a[0]),
        "conv1d": lambda a: F.conv1d(a.unsqueeze(0), a.unsqueeze(-1)),
    }[op]
    a = t(4, 4)
    want = call(a.cpu())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert call(a.cpu()).dtype == torch.bfloat16  # the region is on
        for _ in range(3):  # the first call of its kind, then later ones
            out = unserved_skips(lambda: call(a))
            assert out.dtype == torch.float32
            torch.testing.assert_close(out.cpu(), want)  # the stack's conv rounds its own way
    torch.infini.synchronize()


def test_disabled_and_nested_regions():
    needs_kernels("aten::mm")
    a = t(3, 3)
    with torch.autocast("infini", dtype=torch.bfloat16):
        assert torch.mm(a, a).dtype == torch.bfloat16
        with torch.autocast("infini", enabled=False):
            assert not torch.is_autocast_enabled("infini")
            assert torch.mm(a, a).dtype == torch.float32
        assert torch.mm(a, a).dtype == torch.bfloat16
    assert torch.mm(a, a).dtype == torch.float32


def test_state_and_supported_dtypes():
    assert torch.amp.is_autocast_available("infini")
    assert torch.infini.get_amp_supported_dtype() == [torch.float16, torch.bfloat16, torch.float32]
    assert torch.get_autocast_dtype("infini") == torch.float16  # PyTorch's default for PrivateUse1
    with torch.infini.amp.autocast(dtype=torch.bfloat16):
        assert torch.is_autocast_enabled("infini")
        assert torch.get_autocast_dtype("infini") == torch.bfloat16
    assert not torch.is_autocast_enabled("infini")
    with pytest.raises(Exception):
        # torch.autocast warns and disables itself for an unsupported dtype.
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with torch.autocast("infini", dtype=torch.int32):
                pass


def test_autocast_as_a_decorator():
    @torch.infini.amp.autocast(dtype=torch.bfloat16)
    def inside():
        return torch.is_autocast_enabled("infini"), torch.get_autocast_dtype("infini")

    assert inside() == (True, torch.bfloat16)
    assert not torch.is_autocast_enabled("infini")


def test_grad_scaler_alias_is_bound_to_infini():
    scaler = torch.infini.amp.GradScaler(init_scale=128.0)
    assert isinstance(scaler, torch.amp.GradScaler)
    assert scaler._device == "infini"
    assert scaler.get_scale() == 128.0


def test_custom_fwd_and_custom_bwd_as_torch_cuda_amp():
    """torch.infini.amp.custom_fwd/custom_bwd, as torch.cuda.amp's (which
    older libraries decorate their autograd Functions with): cast_inputs casts
    the forward's floating infini inputs and runs it with autocast off; the
    backward runs under the forward's autocast state."""
    seen = {}

    class Scale(torch.autograd.Function):
        @staticmethod
        @torch.infini.amp.custom_fwd(cast_inputs=torch.float16)
        def forward(ctx, x):
            seen["fwd"] = (x.dtype, torch.is_autocast_enabled("infini"))
            return x * 2

        @staticmethod
        @torch.infini.amp.custom_bwd
        def backward(ctx, grad):
            seen["bwd"] = torch.is_autocast_enabled("infini")
            return grad * 2

    x = torch.ones(3, device=DEV, requires_grad=True)
    with torch.autocast("infini", dtype=torch.bfloat16):
        y = Scale.apply(x)
    assert seen["fwd"] == (torch.float16, False)
    assert y.dtype == torch.float16
    y.float().sum().backward()
    assert seen["bwd"] is False
    assert torch.equal(x.grad.cpu(), torch.full((3,), 2.0))

    class Plain(torch.autograd.Function):
        @staticmethod
        @torch.infini.amp.custom_fwd
        def forward(ctx, x):
            seen["plain"] = torch.is_autocast_enabled("infini")
            return x.clone()

        @staticmethod
        @torch.infini.amp.custom_bwd
        def backward(ctx, grad):
            seen["plain_bwd"] = torch.is_autocast_enabled("infini")
            return grad

    with torch.autocast("infini", dtype=torch.bfloat16):
        z = Plain.apply(x)
    z.sum().backward()
    assert seen["plain"] is True and seen["plain_bwd"] is True
