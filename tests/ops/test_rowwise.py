"""aten::_softmax and aten::_log_softmax, the row-wise table of
ops/rowwise.cpp, against CPU PyTorch: values (bit for bit on the host
runtime), dtypes, shapes, strides, errors and gradients, through the forms
programs use (torch.softmax, F.log_softmax, nn.Softmax, Tensor.softmax).
On the host runtime the table's own kernel serves a contiguous
floating-point input; strided inputs, other dtypes and the Infini stack go
to the generic kernel, and the same oracle holds."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from infini_testing import assert_same as _assert_same
from infini_testing import on_host

# Bit for bit on the host runtime, which runs ATen's CPU kernels; the
# Infini stack rounds its own way (infini_testing's tolerances).
EXACT = dict(rtol=0, atol=0) if on_host() else {}
FORMS = {
    "softmax": lambda x, dim: torch.softmax(x, dim),
    "log_softmax": lambda x, dim: F.log_softmax(x, dim),
    "module": lambda x, dim: torch.nn.Softmax(dim)(x),
    "method": lambda x, dim: x.log_softmax(dim),
}
DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def assert_same(got, want):
    _assert_same(got, want, **EXACT)


def sample(shape, dtype, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * 4).to(dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape_dim", [((), 0), ((), -1), ((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1),
                                       ((4, 1000), -1)], ids=str)
@pytest.mark.parametrize("form", list(FORMS))
def test_matches_cpu(form, shape_dim, dtype):
    shape, dim = shape_dim
    x = sample(shape, dtype)
    assert_same(FORMS[form](x.to("infini"), dim), FORMS[form](x, dim))


@pytest.mark.parametrize("form", ["softmax", "log_softmax"])
def test_strided_and_empty_inputs_match_cpu(form):
    x = sample((5, 6), torch.float32)
    for view in (x.t(), x[:, ::2], x.expand(2, 5, 6), torch.empty(0, 3)):
        for dim in (0, -1):
            assert_same(FORMS[form](view.to("infini"), dim), FORMS[form](view, dim))
    # a transposed infini view (not a copy made contiguous on the way)
    dev = x.to("infini")
    assert_same(FORMS[form](dev.t(), 0), FORMS[form](x.t(), 0))


def test_special_values_match_cpu():
    x = torch.tensor([[0.0, float("inf"), 1.0], [float("-inf"), float("-inf"), 0.0],
                      [float("nan"), 1.0, 2.0], [1e38, -1e38, 0.0]])
    for form in ("softmax", "log_softmax"):
        assert_same(FORMS[form](x.to("infini"), -1), FORMS[form](x, -1))


def test_dtype_argument_and_other_dtypes_follow_cpu():
    x = sample((3, 4), torch.float16)
    assert_same(torch.softmax(x.to("infini"), -1, dtype=torch.float32), torch.softmax(x, -1, dtype=torch.float32))
    i = torch.arange(12).reshape(3, 4)
    with pytest.raises(RuntimeError) as on_cpu:
        torch._softmax(i, -1, False)
    with pytest.raises(RuntimeError) as on_infini:
        torch._softmax(i.to("infini"), -1, False)
    message = str(on_infini.value)
    if on_host() or str(on_cpu.value).split("\n")[0] in message:
        assert str(on_cpu.value).split("\n")[0] in message
    else:  # the Infini stack refuses the dtype, naming the operator
        assert isinstance(on_infini.value, NotImplementedError), message
        assert "aten::_softmax" in message and "int64" in message, message


@pytest.mark.parametrize("shape_dim", [((3, 4), 2), ((3, 4), -3), ((), 1)], ids=str)
def test_a_dim_out_of_range_raises_like_cpu(shape_dim):
    shape, dim = shape_dim
    with pytest.raises(IndexError) as on_cpu:
        torch.softmax(torch.ones(shape), dim)
    with pytest.raises(IndexError) as on_infini:
        torch.softmax(torch.ones(shape, device="infini"), dim)
    assert str(on_infini.value) == str(on_cpu.value)


@pytest.mark.parametrize("form", ["softmax", "log_softmax"])
def test_gradients_match_cpu(form):
    x = sample((4, 6), torch.float64)
    w = sample((4, 6), torch.float64, seed=1)
    grads = []
    for device in ("cpu", "infini"):
        t = x.to(device).detach().requires_grad_()
        (FORMS[form](t, -1) * w.to(device)).sum().backward()
        grads.append(t.grad.cpu())
    torch.testing.assert_close(grads[1], grads[0], **(EXACT or dict(rtol=1e-7, atol=1e-7)))


def test_repeated_and_queued_calls_match_cpu():
    """The table's first call, later calls queued behind each other, and a
    call run at once after a synchronize, all as CPU."""
    x = sample((8, 33), torch.float32)
    dev = x.to("infini")
    outs = [torch.softmax(dev, -1) for _ in range(5)]
    torch.infini.synchronize()
    outs.append(torch.softmax(dev, -1))
    want = torch.softmax(x, -1)
    for out in outs:
        assert_same(out, want)
