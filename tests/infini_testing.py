"""Helpers shared by the test files (imported as ``infini_testing``)."""

from __future__ import annotations

import contextlib
import warnings

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import torch_infini


def hold(stream: torch.Stream, ms: float) -> None:
    """Queue a host-side sleep of ``ms`` on ``stream`` (work after it waits).

    Skips the calling test where the provider cannot queue host work (the
    Infini stack), since "pending" is then not observable."""
    if not torch_infini._C._test_enqueue_delay(stream.stream_id, stream.device_index, float(ms)):
        pytest.skip("the active provider cannot queue a timed wait on a stream")


class RecordingMode(TorchDispatchMode):
    """A dispatch mode that records the name of every operator it sees."""

    def __init__(self):
        super().__init__()
        self.ops: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def calls_run_at_once(stream: torch.Stream | None = None) -> int:
    """How many calls queued on ``stream`` (the current one by default) ran
    at once on their calling thread instead (the host runtime's
    ``HostStream::run_now``; 0 on the Infini stack)."""
    s = stream if stream is not None else torch.infini.current_stream()
    return torch_infini._C._test_calls_run_at_once(s.stream_id, s.device_index)


def drain_async_errors() -> None:
    """Report (and so clear) whatever asynchronous error is left on the
    device: a sticky error is raised once per synchronize, so a few tries
    leave none behind for the next test."""
    for _ in range(4):
        try:
            torch.infini.synchronize()
            return
        except RuntimeError:
            pass


def sample(shape, dtype: torch.dtype) -> torch.Tensor:
    """Deterministic, mostly distinct CPU values of ``dtype``."""
    n = 1
    for s in shape:
        n *= s
    base = torch.arange(n, dtype=torch.int64)
    if dtype == torch.bool:
        return (base % 3 == 1).reshape(shape)
    if dtype.is_floating_point:
        return ((base.to(torch.float64) - n / 2) * 0.25).to(dtype).reshape(shape)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -50), min(info.max, 77)
    return (lo + base % (hi - lo + 1)).to(dtype).reshape(shape)


DEV = torch.device("infini:0")
FLOATS = [torch.float32, torch.float16, torch.bfloat16]
FLOAT_IDS = ["float32", "float16", "bfloat16"]


def on_host() -> bool:
    """Whether the built-in host runtime serves the device (its kernels are
    ATen's CPU kernels: results equal CPU's)."""
    return torch_infini.diagnostics()["provider"] == "host"


def fills_on_device() -> bool:
    """Whether fills (torch.zeros, fill_) run on the device, queued: a fill
    kernel of the provider's own (the host runtime), or InfiniOps' Fill
    through fill.Scalar_out (a WITH_TORCH=ON stack; native on NVIDIA, MetaX,
    Iluvatar and Moore). A WITH_TORCH=OFF stack on InfiniRT's CPU backend has
    neither and copies a host buffer from pageable memory, which waits for
    the stream."""
    return on_host() or torch_infini._C._provider_has_kernel("aten::fill", "Scalar_out")


def fallback_env() -> dict[str, str]:
    """The environment that gives a subprocess fallback_where_unserved()'s
    policy."""
    return {} if on_host() else {"TORCH_INFINI_CPU_FALLBACK": "1"}


@contextlib.contextmanager
def fallback_where_unserved():
    """The opt-in CPU fallback off on the host runtime (everything native) and
    on on the Infini stack, where InfiniOps serves a few operators; the
    previous setting is restored afterwards."""
    from torch_infini import fallback

    was = fallback.is_enabled()
    (fallback.disable if on_host() else fallback.enable)()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # the fallback's once-per-operator warning
            yield
    finally:
        (fallback.enable if was else fallback.disable)()


def tensors_in(value) -> list:
    """The tensors in ``value`` (a tensor, or lists, tuples and dicts of them), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in tensors_in(v)]
    return []


def to_device(value):
    """``value`` (tensors inside lists and tuples too) on infini, strides kept."""
    if isinstance(value, torch.Tensor):
        return value.to(DEV) if value.device.type == "cpu" else value
    if isinstance(value, (list, tuple)):
        return type(value)(to_device(v) for v in value)
    return value


def _tolerance(dtype: torch.dtype) -> dict:
    if on_host():
        return {}  # torch.testing's defaults; in practice bit-identical
    # InfiniOps accumulates and rounds its own way (1 ulp in float16).
    return {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.float16: dict(rtol=2e-3, atol=1e-3),
            torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}.get(dtype, {})


def _significant_strides(t: torch.Tensor) -> list[tuple[int, int]]:
    return [(d, s) for d, (n, s) in enumerate(zip(t.shape, t.stride())) if n > 1]


def assert_same(got, want, **tol) -> None:
    """``got`` (from infini) equals ``want`` (from CPU): values, dtype, shape and
    the strides CPU chose; recursing into tuples and lists."""
    if isinstance(want, torch.Tensor):
        assert isinstance(got, torch.Tensor) and got.device.type == "infini", got
        assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
        assert _significant_strides(got) == _significant_strides(want), (got.stride(), want.stride())
        torch.testing.assert_close(got.cpu(), want, equal_nan=True, **(tol or _tolerance(want.dtype)))
    elif isinstance(want, (list, tuple)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w, **tol)
    else:
        assert got == want


def unserved_skips(fn):
    """Run ``fn()``; where the provider has no kernel for an operator it
    raises NotImplementedError naming it (the Infini stack without that
    InfiniOps kernel): the test is skipped with that message."""
    try:
        return fn()
    except NotImplementedError as e:
        if on_host() or "InfiniOps" not in str(e):
            raise
        pytest.skip(str(e).splitlines()[0])


def matches_cpu(fn, *args, **tol):
    """``fn(*args)`` on infini (tensor arguments copied there, strides kept)
    equals ``fn(*args)`` on the CPU; returns the infini result."""
    want = fn(*args)
    got = unserved_skips(lambda: fn(*to_device(args)))
    assert_same(got, want, **tol)
    return got


def needs_kernels(*ops: str) -> None:
    """Skip unless every operator has an infini kernel, or the opt-in CPU
    fallback is on (``TORCH_INFINI_CPU_FALLBACK=1``).

    For tests whose subject is native here (random draws, autocast casts) but
    whose arithmetic runs on operators another piece of work makes native
    (``mul``, ``mm``, ``softmax``, ...): they run through the fallback until
    then, and natively after, without changing the test."""
    missing = [op for op in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")]
    if missing and not torch_infini.fallback.is_enabled():
        pytest.skip(f"needs infini kernels for {', '.join(missing)} (or TORCH_INFINI_CPU_FALLBACK=1)")
