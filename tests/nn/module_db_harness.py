"""Runs PyTorch's ModuleInfo database (``common_modules.module_db``) on infini,
CPU PyTorch as the oracle.

One case is a (module, dtype, mode) triple: mode ``train`` or ``eval``
(``eval`` only for modules whose ModuleInfo says the two differ). A case
builds every sample's module on the CPU from the same seed, copies it to
infini, and runs the sample's forward on both (the same seed before each, for
dropout), then the backward for the same random output gradients. It checks:

- every output: dtype, shape and values;
- the gradients of every differentiable input and every parameter;
- every buffer after the forward (running statistics);
- where CPU raises, infini raises the same exception type.

On the host runtime values are compared bit for bit (NaNs equal; on the
Infini stack, whose kernels round their own way, within the dtype's
tolerance), with CPU's kernels and the
device's on as many intra-op threads (a stream worker's), so that a
reduction split the same way rounds the same way. A result that is only close
(``assert_close``) is a failure too: "composed differently" must not hide.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch

from infini_testing import tensors_in

import torch_infini

DEV = torch.device("infini:0")
DTYPES = (torch.float32, torch.bfloat16)
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16"}
#: The built-in host runtime runs CPU's kernels: results are compared bit for
#: bit there, and within a dtype's tolerance on the Infini stack.
ON_HOST = torch_infini.diagnostics()["provider"] == "host"
_STACK_TOLERANCE = {torch.float32: dict(rtol=1e-5, atol=1e-5), torch.bfloat16: dict(rtol=1.6e-2, atol=1e-2)}


def module_db():
    """PyTorch's ModuleInfo database (imported lazily: it takes seconds)."""
    from torch.testing._internal.common_modules import module_db as db

    return db


def case_id(info, dtype: torch.dtype, mode: str) -> str:
    """``"<module>-<dtype>-<train|eval>"``, the key of the known-failure list."""
    return f"{info.name}-{DTYPE_NAMES[dtype]}-{mode}"


def cases() -> list:
    """Every (ModuleInfo, dtype, mode) case, in module_db order."""
    out = []
    for info in module_db():
        for dtype in DTYPES:
            for mode in ("train", "eval") if info.train_and_eval_differ else ("train",):
                out.append((info, dtype, mode))
    return out


class CaseFailure(AssertionError):
    """A sample whose infini result differs from CPU's."""


def _to_infini(value, copies: dict | None = None):
    """``value`` with its CPU tensors copied to infini, strides kept; a tensor
    passed twice (KLDivLoss(x, x)) is one copy, passed twice."""
    copies = {} if copies is None else copies
    if isinstance(value, torch.Tensor):
        if id(value) not in copies:
            if torch._debug_has_internal_overlap(value) == 1:  # an expanded tensor: its values, dense
                moved = value.detach().to(DEV)
            else:
                moved = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=DEV)
                moved.copy_(value.detach())
            copies[id(value)] = moved.requires_grad_(value.requires_grad)
        return copies[id(value)]
    if isinstance(value, (list, tuple)):
        return type(value)(_to_infini(v, copies) for v in value)
    if isinstance(value, dict):
        return {k: _to_infini(v, copies) for k, v in value.items()}
    return value


def _same_bits(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    if actual.dtype != expected.dtype:
        raise CaseFailure(f"{what}: dtype {actual.dtype}, CPU gives {expected.dtype}")
    if actual.shape != expected.shape:
        raise CaseFailure(f"{what}: shape {tuple(actual.shape)}, CPU gives {tuple(expected.shape)}")
    got, want = actual.detach().cpu(), expected.detach()
    if torch.equal(got, want):
        return
    if not ON_HOST:  # InfiniOps accumulates and rounds its own way
        try:
            torch.testing.assert_close(got, want, equal_nan=True, **_STACK_TOLERANCE.get(got.dtype, {}))
            return
        except AssertionError as e:
            raise CaseFailure(f"{what}: values differ: {str(e).splitlines()[0]}") from None
    if got.is_floating_point() or got.is_complex():
        same = (got == want) | (got.isnan() & want.isnan())
        if bool(same.all()):
            return
        try:
            torch.testing.assert_close(got, want, equal_nan=True)
            close = "within assert_close's tolerance"
        except AssertionError:
            close = "beyond assert_close's tolerance"
        diff = (got.double() - want.double()).abs().nan_to_num(0).max().item()
        raise CaseFailure(f"{what}: not bit-identical to CPU ({close}; max abs difference {diff:.3g})")
    raise CaseFailure(f"{what}: values differ from CPU's")


def _compare(actual, expected, what: str) -> None:
    a, e = tensors_in(actual), tensors_in(expected)
    if len(a) != len(e):
        raise CaseFailure(f"{what}: {len(a)} tensors, CPU gives {len(e)}")
    for i, (x, y) in enumerate(zip(a, e)):
        _same_bits(x, y, f"{what}[{i}]")


def threads_as_the_device():
    """A context in which the calling thread's CPU kernels (CPU's, and the
    device's when the caller runs them) use as many intra-op threads as a
    stream worker's."""
    import contextlib

    @contextlib.contextmanager
    def ctx():
        before = torch.get_num_threads()
        torch.set_num_threads(torch_infini._C._kernel_threads() or torch.get_num_threads())
        try:
            yield
        finally:
            torch.set_num_threads(before)

    return ctx()


def _run(module, sample, seed: int):
    torch.manual_seed(seed)
    return module(*sample.forward_input.args, **sample.forward_input.kwargs)


def _grad_inputs(module, forward) -> list:
    inputs = list({id(t): t for t in tensors_in([forward.args, forward.kwargs])
                   if t.requires_grad and (t.is_floating_point() or t.is_complex())}.values())
    return inputs + [p for p in module.parameters() if p.requires_grad]


def run_sample(info, dtype: torch.dtype, mode: str, sample, index: int) -> None:
    """One sample on CPU and infini; raises CaseFailure where they differ."""
    args, kwargs = sample.constructor_input.args, sample.constructor_input.kwargs
    torch.manual_seed(index)
    cpu_module = info.module_cls(*args, **kwargs).to(dtype)
    cpu_module.train(mode == "train")
    dev_module = copy.deepcopy(cpu_module).to(DEV)
    dev_sample = copy.copy(sample)
    dev_sample.forward_input = copy.copy(sample.forward_input)
    copies: dict = {}
    dev_sample.forward_input.args = _to_infini(sample.forward_input.args, copies)
    dev_sample.forward_input.kwargs = _to_infini(sample.forward_input.kwargs, copies)

    try:
        expected = _run(cpu_module, sample, index)
    except Exception as cpu_error:  # noqa: BLE001 (CPU's error is the oracle)
        try:
            _run(dev_module, dev_sample, index)
            torch.infini.synchronize()
        except Exception as e:  # noqa: BLE001
            if isinstance(e, type(cpu_error)):
                return
            raise CaseFailure(f"sample {index}: CPU raises {type(cpu_error).__name__}, infini "
                              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        raise CaseFailure(f"sample {index}: CPU raises {type(cpu_error).__name__}, infini does not")
    actual = _run(dev_module, dev_sample, index)
    _compare(actual, expected, f"sample {index} output")
    _compare(list(dev_module.buffers()), list(cpu_module.buffers()), f"sample {index} buffers")

    outs_cpu = [t for t in tensors_in(expected) if t.requires_grad]
    outs_dev = [t for t in tensors_in(actual) if t.requires_grad]
    wrt_cpu = _grad_inputs(cpu_module, sample.forward_input)
    wrt_dev = _grad_inputs(dev_module, dev_sample.forward_input)
    if not outs_cpu or not wrt_cpu:
        return
    gen = torch.Generator().manual_seed(index)
    grads = [torch.randn(t.shape, generator=gen, dtype=torch.float32).to(t.dtype) for t in outs_cpu]
    want = torch.autograd.grad(outs_cpu, wrt_cpu, grads, allow_unused=True)
    got = torch.autograd.grad(outs_dev, wrt_dev, [g.to(DEV) for g in grads], allow_unused=True)
    for i, (g, w) in enumerate(zip(got, want)):
        if (g is None) != (w is None):
            raise CaseFailure(f"sample {index} grad {i}: {'infini' if g is None else 'CPU'} has none")
        if w is not None:
            _same_bits(g, w, f"sample {index} grad {i}")


@dataclass
class Outcome:
    samples: int


def samples_of(info, dtype: torch.dtype, mode: str) -> list:
    torch.manual_seed(1234)
    return [s for s in info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True,
                                               training=mode == "train")
            if s.forward_input is not None]


#: Samples per case the test runs (the loss modules have over a hundred each;
#: the first ones cover every constructor argument the generator varies
#: first). ``run_case(..., limit=None)`` runs them all.
SAMPLES_PER_CASE = 6


def run_case(info, dtype: torch.dtype, mode: str, limit: int | None = SAMPLES_PER_CASE) -> Outcome:
    """Runs a case's samples (the first ``limit``); raises at the first failure."""
    samples = samples_of(info, dtype, mode)[:limit]
    with threads_as_the_device():
        for index, sample in enumerate(samples):
            run_sample(info, dtype, mode, sample, index)
        torch.infini.synchronize()
    return Outcome(len(samples))
