"""Cached decisions against the state they depend on: the same call before
and after a change of global or thread-local state equals CPU's under the
new state (values, dtype and strides).

The generic kernel caches each call's output layouts, its refused
decompositions and its CPU checks by the call's arguments and the state in
csrc/runtime/dispatch_state.h. A test that calls an operation once cannot
see a key that misses a part: each test here calls it first under one
state, then again under another. The oracle is CPU PyTorch under the same
state. Several of these failed before the state was keyed (df2f986): the
default dtype's, the Python scalar's wrap, the flush-denormal one.
"""

from __future__ import annotations

import contextlib
import time

import pytest
import torch

from infini_testing import DEV, assert_same, hold, on_host, sample, unserved_skips


def before_and_after(fn, change, *args) -> None:
    """``fn(*args)`` on infini, then under ``change()`` (a context manager)
    again: each equal to CPU's under the same state."""
    cpu_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]

    def on_device():
        return [a.to(DEV) if isinstance(a, torch.Tensor) else a for a in cpu_args]

    assert_same(unserved_skips(lambda: fn(*on_device())), fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in cpu_args]))
    with change():
        want = fn(*[a.clone() if isinstance(a, torch.Tensor) else a for a in cpu_args])
        got = unserved_skips(lambda: fn(*on_device()))
        assert_same(got, want)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    was = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(was)


# -- the default dtype (and so the default complex dtype) -------------------

@pytest.mark.parametrize("fn", [
    pytest.param(lambda a: a / a, id="int_true_divide"),
    pytest.param(lambda a: torch.div(a, a), id="int_div"),
    pytest.param(lambda a: a * 2.5, id="int_times_float_scalar"),
    pytest.param(lambda a: a + 1.5, id="int_plus_float_scalar"),
    pytest.param(lambda a: torch.true_divide(a, 3), id="int_true_divide_int_scalar"),
    pytest.param(lambda a: a * 1j, id="int_times_complex_scalar"),
    pytest.param(lambda a: torch.sqrt(a), id="int_sqrt"),
    pytest.param(lambda a: a.float() * 1j, id="float_times_complex_scalar"),
])
def test_default_dtype_change(fn):
    a = sample((3, 4), torch.int32).abs() + 1
    before_and_after(fn, lambda: default_dtype(torch.float64), a)


def test_default_dtype_change_both_ways():
    a = sample((5,), torch.int64).abs() + 1
    with default_dtype(torch.float64):
        assert_same((a.to(DEV) / a.to(DEV)), a / a)
    assert_same((a.to(DEV) / a.to(DEV)), a / a)  # float32 again


# -- grad mode and inference mode -------------------------------------------

@pytest.mark.parametrize("change", [torch.no_grad, torch.enable_grad, torch.inference_mode],
                         ids=["no_grad", "enable_grad", "inference_mode"])
def test_grad_and_inference_mode(change):
    def fn(x, w):
        return torch.nn.functional.linear(torch.softmax(x, -1), w)

    before_and_after(fn, change, sample((4, 6), torch.float32), sample((3, 6), torch.float32))


def test_inference_mode_makes_inference_tensors_after_a_normal_call():
    x = sample((8,), torch.float32)
    (x.to(DEV) * 2).cpu()
    with torch.inference_mode():
        got = x.to(DEV) * 2
        want = x * 2
    assert got.is_inference() == want.is_inference()
    assert_same(got, want)


# -- deterministic algorithms and filling uninitialized memory --------------

@contextlib.contextmanager
def deterministic(fill: bool):
    was, was_fill = torch.are_deterministic_algorithms_enabled(), torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True)
    torch.utils.deterministic.fill_uninitialized_memory = fill
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(was)
        torch.utils.deterministic.fill_uninitialized_memory = was_fill


@pytest.mark.parametrize("fill", [True, False], ids=["fill", "no_fill"])
def test_deterministic_algorithms(fill):
    def fn(x, i, v):
        return x.index_put((i,), v, accumulate=True)

    before_and_after(fn, lambda: deterministic(fill), sample((6, 3), torch.float32),
                     torch.tensor([0, 2, 2, 5]), sample((4, 3), torch.float32))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=["float32", "int64"])
def test_fill_uninitialized_memory_after_a_plain_call(dtype):
    x = torch.zeros(4, dtype=dtype)
    d = x.to(DEV)
    d.resize_(4)
    with deterministic(True):
        want = torch.empty(5, dtype=dtype)
        got = torch.empty(5, dtype=dtype, device=DEV)
        assert_same(got, want)
        x.resize_(9)
        d.resize_(9)
        assert_same(d, x)


# -- autocast ----------------------------------------------------------------

def test_autocast_on_and_off():
    a, b = sample((4, 8), torch.float32), sample((8, 3), torch.float32)
    assert_same(torch.mm(a.to(DEV), b.to(DEV)), torch.mm(a, b))
    with torch.autocast("infini", dtype=torch.bfloat16):
        got = torch.mm(a.to(DEV), b.to(DEV))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = torch.mm(a, b)
    assert_same(got, want)
    assert_same(torch.mm(a.to(DEV), b.to(DEV)), torch.mm(a, b))  # and off again


# -- dispatch-key TLS: Python modes, functionalization ----------------------

class Recorder(torch.utils._python_dispatch.TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_python_dispatch_mode():
    def fn(a, b):
        return torch.addcmul(a, a, b, value=0.5).sum(0)

    before_and_after(fn, Recorder, sample((3, 4), torch.float32), sample((3, 4), torch.float32))


def test_disable_torch_dispatch():
    before_and_after(lambda a: (a * 3).cumsum(0), torch._C._DisableTorchDispatch, sample((5, 2), torch.float32))


def test_functionalization():
    def fn(a):
        b = a.clone()
        b.add_(1)
        b.view(-1)[0] = 7
        return b * 2

    a = sample((2, 3), torch.float32)
    assert_same(fn(a.to(DEV)), fn(a))
    assert_same(torch.func.functionalize(fn)(a.to(DEV)), torch.func.functionalize(fn)(a))
    assert_same(fn(a.to(DEV)), fn(a))


# -- backend flags -----------------------------------------------------------

@contextlib.contextmanager
def matmul_precision(value: str):
    was = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(value)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(was)


def test_float32_matmul_precision():
    before_and_after(torch.mm, lambda: matmul_precision("medium"),
                     sample((16, 32), torch.float32), sample((32, 8), torch.float32))


@contextlib.contextmanager
def fp32_precision(backend, value: str):
    """The per-backend API alone (``torch.backends.cuda.matmul
    .fp32_precision``): PyTorch's one-name getters then raise, CPU's kernels
    do not read them."""
    was = backend.fp32_precision
    backend.fp32_precision = value
    try:
        yield
    finally:
        backend.fp32_precision = was


@pytest.mark.parametrize("backend, value", [
    (torch.backends.cuda.matmul, "tf32"),
    (torch.backends.mkldnn.matmul, "bf16"),
], ids=["cuda_tf32", "onednn_bf16"])
def test_fp32_precision_set_per_backend(backend, value):
    # Every generic-kernel call raised "PyTorch is checking the matmul
    # precision without a specific backend name" here before the state read
    # the precision per backend.
    before_and_after(torch.mul, lambda: fp32_precision(backend, value),
                     sample((4, 3), torch.float32), sample((4, 3), torch.float32))
    if value == "tf32":  # no CPU kernel computes in TF32
        before_and_after(torch.mm, lambda: fp32_precision(backend, value),
                         sample((16, 32), torch.float32), sample((32, 8), torch.float32))


@contextlib.contextmanager
def flush_denormal():
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        yield
    finally:
        torch.set_flush_denormal(False)


def test_flush_denormal():
    """Denormals are far below any tolerance: compared bit for bit."""
    tiny = torch.tensor([1e-39, -2e-40, 1.0, 3e-38], dtype=torch.float32)
    d = tiny.to(DEV)
    assert torch.equal((d * 0.5).cpu(), tiny * 0.5)
    with flush_denormal():
        want = tiny * 0.5
        hold(torch.infini.current_stream(), 20)  # the stream's worker runs what follows
        got = d * 0.5
        time.sleep(0.1)  # while the caller sleeps, not as the caller's own wait
        got = got.cpu()
    assert want[0] == 0 and torch.equal(got, want), (got, want)


# -- a Python scalar's type and value ---------------------------------------

@pytest.mark.parametrize("fn, first, second", [
    pytest.param(lambda a, s: a + s, 3, 256, id="uint8_plus_256_wraps"),
    pytest.param(lambda a, s: a * s, 2, 300, id="uint8_times_300_wraps"),
    pytest.param(lambda a, s: a + s, 3, 2.5, id="uint8_plus_float"),
    pytest.param(lambda a, s: a.add(s), 1, True, id="uint8_plus_bool"),
])
def test_python_scalar_type_and_value(fn, first, second):
    a = torch.tensor([1, 2, 250], dtype=torch.uint8)
    assert_same(fn(a.to(DEV), first), fn(a, first))
    assert_same(fn(a.to(DEV), second), fn(a, second))


def test_pow_by_a_negative_integer_after_a_positive_one():
    a = torch.tensor([1, 2, 3])
    assert_same(a.to(DEV) ** 2, a ** 2)
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        a ** -1
    with pytest.raises(RuntimeError) as dev:
        a.to(DEV) ** -1
    if not on_host() and isinstance(dev.value, NotImplementedError) and "InfiniOps" in str(dev.value):
        pytest.skip(str(dev.value).splitlines()[0])  # the stack refuses integer pow by a scalar
    assert "Integers to negative integer powers are not allowed" in str(dev.value)


def test_pow_by_a_negative_integer_tensor_scalar_after_a_positive_one():
    a = torch.tensor([1, 2, 3])
    assert_same(a.to(DEV) ** torch.tensor(2), a ** torch.tensor(2))
    assert_same(a.to(DEV) ** torch.tensor(-1), a ** torch.tensor(-1))


# -- tensor bits: conj, neg --------------------------------------------------

def test_conj_bit():
    a = torch.randn(3, 3, dtype=torch.complex64, generator=torch.Generator().manual_seed(0))
    b = torch.randn(3, 3, dtype=torch.complex64, generator=torch.Generator().manual_seed(1))
    assert_same(torch.mm(a.to(DEV), b.to(DEV)), torch.mm(a, b))
    assert_same(torch.mm(a.to(DEV).conj(), b.to(DEV)), torch.mm(a.conj(), b))
    assert_same(torch.linalg.solve(a.to(DEV).conj(), b.to(DEV)), torch.linalg.solve(a.conj(), b))


def test_neg_bit():
    a = torch.randn(4, dtype=torch.complex64, generator=torch.Generator().manual_seed(2))
    assert_same(a.to(DEV).imag * 2, a.imag * 2)
    assert_same(a.to(DEV).conj().imag * 2, a.conj().imag * 2)  # the imaginary part's neg bit


# -- memory format, storage offset, aliasing --------------------------------

def test_memory_format():
    x = sample((2, 3, 4, 5), torch.float32)
    assert_same(torch.relu(x.to(DEV)), torch.relu(x))
    cl = x.contiguous(memory_format=torch.channels_last)
    assert_same(torch.relu(cl.to(DEV)), torch.relu(cl))
    assert_same(torch.relu(x.to(DEV)) + 1, torch.relu(x) + 1)


def test_storage_offset():
    x = sample((6, 4), torch.float32)
    d = x.to(DEV)
    for i in range(3):
        assert_same(torch.exp(d[i:i + 3]), torch.exp(x[i:i + 3]))
        assert_same(torch.mul(d[i:i + 3], d[:3], out=torch.empty(3, 4, device=DEV)), torch.mul(x[i:i + 3], x[:3]))


def test_aliasing_between_arguments():
    a, b = sample((4, 4), torch.float32), sample((4, 4), torch.float32).flip(0)
    da, db = a.to(DEV), b.to(DEV)
    assert_same(torch.add(da, db, out=torch.empty(4, 4, device=DEV)), torch.add(a, b))
    assert_same(torch.add(da, db, out=da), torch.add(a, b, out=a))
    assert_same(torch.mm(da, db, out=torch.empty(4, 4, device=DEV)), torch.mm(a, b))
    index = torch.tensor([0, 1, 2, 3])
    assert_same(torch.index_select(da, 0, index.to(DEV), out=torch.empty(4, 4, device=DEV)),
                torch.index_select(a, 0, index))
    with pytest.raises(RuntimeError) as cpu:
        torch.index_select(a, 0, index, out=a)  # CPU refuses an output that is the input
    with pytest.raises(type(cpu.value), match="unsupported operation"):
        torch.index_select(da, 0, index.to(DEV), out=da)
    assert_same(da.mul_(da), a.mul_(a))
