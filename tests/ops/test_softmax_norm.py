"""softmax, log_softmax, layer_norm and rms_norm on infini against CPU
PyTorch, forward and backward."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infini_testing import on_host, DEV, FLOAT_IDS, FLOATS, matches_cpu, sample, to_device, unserved_skips, assert_same


def values(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(*shape, generator=g) * 2).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
@pytest.mark.parametrize("dim", [-1, 0, 1])
def test_softmax_and_log_softmax(dtype, dim):
    x = values(3, 5, 7, dtype=dtype)
    matches_cpu(lambda x: torch.softmax(x, dim), x)
    matches_cpu(lambda x: torch.log_softmax(x, dim), x)
    matches_cpu(lambda x: torch.softmax(x.transpose(0, 2), dim), x)  # strided input


def test_softmax_with_a_causal_mask_and_dtype_argument():
    scores = values(2, 4, 6, 6)
    mask = torch.full((6, 6), float("-inf")).triu(1)
    matches_cpu(lambda s, m: torch.softmax(s + m, dim=-1), scores, mask)
    matches_cpu(lambda s: torch.softmax(s.half(), dim=-1, dtype=torch.float32), scores)
    matches_cpu(lambda s: torch.softmax(s[:, :, :0], dim=-1), scores)  # empty


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_layer_norm(dtype):
    x, w, b = values(4, 6, 8, dtype=dtype), values(8, dtype=dtype, seed=1), values(8, dtype=dtype, seed=2)
    matches_cpu(lambda x: F.layer_norm(x, (8,)), x)
    matches_cpu(lambda x, w, b: F.layer_norm(x, (8,), w, b, eps=1e-3), x, w, b)
    matches_cpu(lambda x: F.layer_norm(x, (6, 8)), x)
    matches_cpu(lambda x: F.layer_norm(x.transpose(0, 1), (8,)), x)


@pytest.mark.parametrize("dtype", FLOATS, ids=FLOAT_IDS)
def test_rms_norm(dtype):
    x, w = values(4, 6, 8, dtype=dtype), values(8, dtype=dtype, seed=1)
    matches_cpu(lambda x, w: F.rms_norm(x, (8,), w, eps=1e-6), x, w)
    matches_cpu(lambda x: F.rms_norm(x, (8,)), x)


def grads(fn, *inputs):
    leaves = [t.detach().requires_grad_() for t in inputs]
    out = fn(*leaves)
    out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(out.device))
    return [out.detach()] + [t.grad for t in leaves]


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
def test_backward(name):
    fns = {
        "softmax": lambda x, w: torch.softmax(x * w, -1),
        "log_softmax": lambda x, w: torch.log_softmax(x * w, -1),
        "layer_norm": lambda x, w: F.layer_norm(x, (8,), w),
        "rms_norm": lambda x, w: F.rms_norm(x, (8,), w),
    }
    x, w = values(3, 8), values(8, seed=1)
    want = grads(fns[name], x, w)
    got = unserved_skips(lambda: grads(fns[name], x.to(DEV), w.to(DEV)))
    assert_same(got, want, rtol=1e-5, atol=1e-6)


def test_unsupported_dtype_names_the_operator_and_dtype():
    x = sample((2, 3), torch.int64)
    if on_host():  # CPU's own refusal, at the call
        with pytest.raises(RuntimeError) as cpu:
            torch.softmax(x, -1, dtype=None)
        with pytest.raises(RuntimeError) as infini:
            torch.softmax(x.to(DEV), -1, dtype=None)
        assert str(infini.value) == str(cpu.value)
        return
    with pytest.raises(NotImplementedError, match=r"aten::_softmax.*(dtype int64 is not supported|InfiniOps)"):
        torch.softmax(x.to(DEV), -1, dtype=None)


SDPA_CASES = {
    "plain": {},
    "causal": dict(is_causal=True),
    "bool-mask": dict(attn_mask=torch.rand(6, 6, generator=torch.Generator().manual_seed(5)) > 0.3),
    "float-mask": dict(attn_mask=values(2, 1, 6, 6, seed=6)),
    "scale": dict(scale=0.3),
    "gqa": dict(enable_gqa=True),
}


@pytest.mark.parametrize("case", list(SDPA_CASES))
def test_scaled_dot_product_attention_forward_backward_and_backend(case):
    """scaled_dot_product_attention on infini against CPU: outputs and the
    gradients of q, k and v, and on the host runtime the backend CPU chose
    (its fused flash attention, one kernel each way, not the math backend's
    dozen), read from the autograd node."""
    kwargs = SDPA_CASES[case]
    heads_kv = 2 if kwargs.get("enable_gqa") else 4
    q, k, v = values(2, 4, 6, 8), values(2, heads_kv, 6, 8, seed=1), values(2, heads_kv, 6, 8, seed=2)

    def attention(q, k, v, **kw):
        leaves = [t.detach().requires_grad_() for t in (q, k, v)]
        out = F.scaled_dot_product_attention(*leaves, **kw)
        out.backward(torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(out.device))
        return out, [t.grad for t in leaves]

    want, want_grads = attention(q, k, v, **kwargs)
    got, got_grads = unserved_skips(lambda: attention(*to_device((q, k, v)), **to_device_kwargs(kwargs)))
    # The host runtime runs CPU's flash kernel; the Infini stack the math
    # backend (its matmuls and softmax), within float32's tolerance.
    assert_same(got.detach(), want.detach(), **(dict(rtol=1e-5, atol=1e-6) if on_host() else {}))
    assert_same(got_grads, want_grads, rtol=1e-5, atol=1e-5)
    if on_host():
        assert got.grad_fn.name() == want.grad_fn.name(), (got.grad_fn.name(), want.grad_fn.name())


def test_scaled_dot_product_attention_follows_the_backend_flags():
    """torch.nn.attention.sdpa_kernel restricts infini's choice as it does
    CPU's: under MATH both run the math backend."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    q = values(1, 2, 4, 8, seed=3).requires_grad_()
    with sdpa_kernel(SDPBackend.MATH):
        want = F.scaled_dot_product_attention(q, q, q)
        got = unserved_skips(lambda: F.scaled_dot_product_attention(*(q.detach().to(DEV).requires_grad_(),) * 3))
    assert_same(got.detach(), want.detach(), rtol=1e-5, atol=1e-6)
    assert got.grad_fn.name() == want.grad_fn.name()


def to_device_kwargs(kwargs: dict) -> dict:
    return {name: to_device(value) for name, value in kwargs.items()}


@pytest.mark.parametrize("training", [True, False], ids=["training", "eval"])
@pytest.mark.parametrize("dtypes", [(torch.float32, torch.float32), (torch.bfloat16, torch.float32)],
                         ids=["float32", "bfloat16_mixed"])
def test_batch_norm_by_its_other_names_matches_cpu(dtypes, training):
    """_native_batch_norm_legit and _batch_norm_with_update (which compiled
    and exported programs call) run as native_batch_norm, CPU's same kernel:
    results and the running statistics they update, as CPU's."""
    dtype, params = dtypes
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, 6, generator=g).to(dtype)
    w, b, mean = (torch.randn(3, generator=g).to(params) for _ in range(3))
    var = torch.rand(3, generator=g).to(params) + 0.5
    calls = {
        "legit": lambda x, w, b, m, v: torch.ops.aten._native_batch_norm_legit(x, w, b, m, v, training, 0.1, 1e-5),
        "with_update": lambda x, w, b, m, v: torch.ops.aten._batch_norm_with_update(x, w, b, m, v, 0.1, 1e-5),
    }
    for name, call in calls.items():
        cpu_stats, dev_stats = [mean.clone(), var.clone()], [mean.to(DEV), var.to(DEV)]
        want = call(x, w, b, *cpu_stats)
        got = unserved_skips(lambda: call(x.to(DEV), w.to(DEV), b.to(DEV), *dev_stats))
        assert_same(list(got), list(want))
        assert_same(dev_stats, cpu_stats)
