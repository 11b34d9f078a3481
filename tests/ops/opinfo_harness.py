"""Runs PyTorch's OpInfo samples on infini with CPU PyTorch as the oracle.

One case is an (OpInfo, dtype, direction) triple, direction ``forward`` or
``backward``. A case runs the first few samples OpInfo gives for the dtype
(``SAMPLES_PER_CASE``) on the CPU and, copied, on infini:

- forward: every output matches CPU's in dtype, shape and value (strides
  too, for dense outputs), or, where CPU raises, infini raises the same
  exception type at the call;
- backward: the gradients of every differentiable input match CPU's, for
  the same random output gradients.

Every sample runs ``RUNS`` times on infini, on fresh copies of the same
inputs, each run compared with CPU's: the host runtime runs the first call
of a kind directly and queues later ones with what it learned, so a wrong
value from the second call on (binary_cross_entropy's was) shows only so.

Random operators draw from generators seeded alike before each side: the
infini generator reproduces the CPU's numbers. Operators whose results are
undefined memory (``empty``...) are compared by metadata only.

Used by ``test_opinfo.py`` (the test) and ``tools/opinfo_sweep.py`` (pass
rates, crash-isolated).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from infini_testing import tensors_in

DEV = torch.device("infini:0")
SAMPLES_PER_CASE = 1  # of each case's samples (each run RUNS times); tools/opinfo_sweep.py --samples takes more
RUNS = 2  # infini runs of every sample, on fresh copies of its inputs

FORWARD_DTYPES = (torch.float32, torch.bfloat16, torch.int64, torch.complex64)
BACKWARD_DTYPES = (torch.float32, torch.bfloat16)
DTYPE_NAMES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.int64: "int64",
               torch.complex64: "complex64"}

# Results are uninitialized memory: only their metadata is defined.
UNDEFINED_VALUES = ("empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided",
                    "empty_permuted", "nn.functional.dropout", "nn.functional.alpha_dropout")


def op_db():
    """PyTorch's OpInfo database (imported lazily: it takes seconds)."""
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def case_id(op, dtype: torch.dtype, direction: str) -> str:
    """``"<name>[.<variant>]-<dtype>-<direction>"``, the key of the known-failure list."""
    name = op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")
    return f"{name}-{DTYPE_NAMES[dtype]}-{direction}"


def cases():
    """Every (OpInfo, dtype, direction) CPU supports, in op_db order."""
    out = []
    for op in op_db():
        supported = op.supported_dtypes("cpu")
        for dtype in FORWARD_DTYPES:
            if dtype in supported:
                out.append((op, dtype, "forward"))
        if op.supports_autograd:
            backward = op.supported_backward_dtypes("cpu")
            for dtype in BACKWARD_DTYPES:
                if dtype in backward and dtype in supported:
                    out.append((op, dtype, "backward"))
    return out


class CaseFailure(AssertionError):
    """A sample whose infini result differs from CPU's."""


def _to_infini(value, requires_grad: bool = False):
    """``value`` with its CPU tensors copied to infini (strides kept)."""
    if isinstance(value, torch.Tensor):
        moved = torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=DEV)
        moved.copy_(value.detach())
        if requires_grad and value.requires_grad:
            moved.requires_grad_(True)
        return moved
    if isinstance(value, (list, tuple)):
        return type(value)(_to_infini(v, requires_grad) for v in value)
    if isinstance(value, dict):
        return {k: _to_infini(v, requires_grad) for k, v in value.items()}
    return value


def _samples(op, dtype: torch.dtype, requires_grad: bool, count: int) -> list:
    """The first ``count`` (CPU sample, infini sample) pairs.

    Both sides come from OpInfo's own sample generator, for "cpu" and for
    "infini", with the generators seeded alike (as PyTorch's device-type
    tests make samples on the device under test): tensor arguments that a
    sample keeps on the CPU stay there, and factories are asked for infini
    results. Samples whose inputs nevertheless differ are copied from the
    CPU sample instead."""
    # The generator function itself: OpInfo.sample_inputs wraps it in a
    # tracker that inspects the whole call stack per sample (slow under pytest).
    _seed_all(1234)
    cpu = []
    for sample in op.sample_inputs_func(op, "cpu", dtype, requires_grad):
        if len(cpu) == count:
            break
        cpu.append(sample)
    _seed_all(1234)
    dev = []
    for sample in op.sample_inputs_func(op, DEV.type, dtype, requires_grad):
        if len(dev) == len(cpu):
            break
        dev.append(sample)
    pairs = []
    for i, c in enumerate(cpu):
        d = dev[i] if i < len(dev) else None
        if d is None or not _same_inputs(c, d):
            d = c.transform(lambda t: _to_infini(t, requires_grad))
        # Fresh copies of the infini sample for the later runs, made before
        # anything runs (an in-place sample writes its inputs): the same
        # devices (a CPU index stays on the CPU), values, strides and flags.
        again = [d.transform(_fresh_copy) for _ in range(RUNS - 1)]
        pairs.append((c, [d] + again))
    return pairs


def _fresh_copy(t):
    """A new leaf with ``t``'s device, dtype, strides, values and requires_grad
    (anything but a tensor as it is)."""
    if not isinstance(t, torch.Tensor):
        return t
    # The whole storage: a view may be read past its extent (as_strided of a
    # partial view).
    copy = torch.empty(0, dtype=t.dtype, device=t.device)
    copy.set_(t.untyped_storage().clone(), t.storage_offset(), t.shape, t.stride())
    if t.is_conj():  # the same lazy conjugate / negative views of the raw values
        copy = copy.conj()
    if t.is_neg():
        copy = torch._neg_view(copy)
    return copy.requires_grad_(t.requires_grad)


def _seed_all(seed: int) -> None:
    """Every generator OpInfo's sample functions draw from (as its tracker does)."""
    import random

    import numpy

    torch.manual_seed(seed)
    random.seed(seed)
    numpy.random.seed(seed)


def _skeleton(value):
    """``value`` with tensors replaced by a placeholder (the non-tensor arguments)."""
    if isinstance(value, torch.Tensor):
        return "<tensor>"
    if isinstance(value, (list, tuple)):
        return type(value)(_skeleton(v) for v in value)
    if isinstance(value, dict):
        return {k: _skeleton(v) for k, v in value.items()}
    return value


def _same_inputs(cpu, dev) -> bool:
    if repr(_skeleton([cpu.args, cpu.kwargs])) != repr(_skeleton([dev.args, dev.kwargs])).replace(
            DEV.type + ":0", "cpu").replace("'" + DEV.type + "'", "'cpu'"):
        return False
    a = tensors_in([cpu.input, cpu.args, cpu.kwargs])
    b = tensors_in([dev.input, dev.args, dev.kwargs])
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x.shape != y.shape or x.dtype != y.dtype or x.stride() != y.stride():
            return False
        if not torch.equal(x.detach().resolve_conj().resolve_neg(), y.detach().cpu().resolve_conj().resolve_neg()):
            return False
    return True


def _call(op, sample, seed: int):
    torch.manual_seed(seed)
    return op(sample.input, *sample.args, **sample.kwargs)


def _compare(actual, expected, what: str, values: bool = True, inputs: bool = False) -> None:
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            raise CaseFailure(f"{what}: expected a tensor, got {type(actual).__name__}")
        if not inputs and actual.device.type != DEV.type and expected.numel() > 0:
            raise CaseFailure(f"{what}: result on {actual.device}, expected infini")
        if actual.dtype != expected.dtype:
            raise CaseFailure(f"{what}: dtype {actual.dtype}, CPU gives {expected.dtype}")
        if actual.shape != expected.shape:
            raise CaseFailure(f"{what}: shape {tuple(actual.shape)}, CPU gives {tuple(expected.shape)}")
        if (expected.layout == torch.strided and expected.numel() > 1
                and _dense(expected) and actual.stride() != expected.stride()):
            raise CaseFailure(f"{what}: strides {actual.stride()}, CPU gives {expected.stride()}")
        if values:
            got = actual.detach().cpu()
            if expected.is_conj():
                expected = expected.resolve_conj()
            if expected.is_neg():
                expected = expected.resolve_neg()
            try:
                torch.testing.assert_close(got, expected.detach(), equal_nan=True, check_device=False,
                                           check_stride=False)
            except AssertionError as e:
                raise CaseFailure(f"{what}: values differ: {str(e).splitlines()[0]}") from None
        return
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise CaseFailure(f"{what}: expected a sequence of {len(expected)}, got {actual!r:.80}")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, f"{what}[{i}]", values, inputs)
        return
    if isinstance(expected, float) and isinstance(actual, float) and math.isnan(expected):
        if not math.isnan(actual):
            raise CaseFailure(f"{what}: {actual!r}, CPU gives nan")
        return
    if values and actual != expected:
        raise CaseFailure(f"{what}: {actual!r:.80}, CPU gives {expected!r:.80}")


def _dense(t: torch.Tensor) -> bool:
    """Non-overlapping and dense: its strides then say a memory format."""
    from torch._prims_common import is_non_overlapping_and_dense_or_false

    return is_non_overlapping_and_dense_or_false(t)


def _forward_sample(op, sample, runs: list, index: int) -> None:
    values = op.name not in UNDEFINED_VALUES
    try:
        expected = _call(op, sample, seed=index)
    except Exception as cpu_error:  # noqa: BLE001  (CPU's error is the oracle)
        for moved in runs:
            _expect_error(op, moved, index, cpu_error)
        return
    for run, moved in enumerate(runs):
        what = f"sample {index}" + (f" (run {run + 1})" if run else "")
        actual = _call(op, moved, seed=index)
        _compare(actual, expected, f"{what} output", values)
        # In-place and out= variants write their inputs: compare those too.
        _compare(tensors_in([moved.input, moved.args]), tensors_in([sample.input, sample.args]),
                 f"{what} inputs after the call", values, inputs=True)


def _expect_error(op, moved, index: int, cpu_error: Exception, run=None) -> None:
    """infini must raise what CPU raised (type), at the call or at the next sync."""
    try:
        (run or (lambda: _call(op, moved, seed=index)))()
        torch.infini.synchronize()
    except Exception as e:  # noqa: BLE001
        if not isinstance(e, type(cpu_error)):
            raise CaseFailure(f"sample {index}: CPU raises {type(cpu_error).__name__}, infini "
                              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        return
    raise CaseFailure(f"sample {index}: CPU raises {type(cpu_error).__name__} "
                      f"({str(cpu_error).splitlines()[0]}), infini does not") from None


def _differentiable(value) -> list:
    return [t for t in tensors_in(value) if t.requires_grad and (t.is_floating_point() or t.is_complex())]


def _backward_sample(op, sample, runs: list, index: int) -> None:
    inputs_cpu = _differentiable([sample.input, sample.args, sample.kwargs])
    if not inputs_cpu:
        return
    out_cpu = [t for t in tensors_in(_call(op, sample, seed=index)) if t.requires_grad]
    if not out_cpu:
        return
    gen = torch.Generator().manual_seed(index)
    grads_cpu = [torch.randn(t.shape, generator=gen, dtype=t.dtype) for t in out_cpu]
    try:
        expected = torch.autograd.grad(out_cpu, inputs_cpu, grads_cpu, allow_unused=True)
    except Exception as cpu_error:  # noqa: BLE001
        expected = cpu_error
    for run, moved in enumerate(runs):
        _backward_run(op, moved, index, run, len(inputs_cpu), out_cpu, grads_cpu, expected)


def _backward_run(op, moved, index: int, run: int, n_cpu: int, out_cpu: list, grads_cpu: list,
                  expected) -> None:
    """One infini run of a backward sample against CPU's gradients (or error)."""
    what = f"sample {index}" + (f" (run {run + 1})" if run else "")
    inputs_dev = _differentiable([moved.input, moved.args, moved.kwargs])
    if len(inputs_dev) != n_cpu:
        raise CaseFailure(f"{what}: {len(inputs_dev)} differentiable inputs, CPU has {n_cpu}")
    out_dev = [t for t in tensors_in(_call(op, moved, seed=index)) if t.requires_grad]
    if len(out_dev) != len(out_cpu):
        raise CaseFailure(f"{what}: {len(out_dev)} differentiable outputs, CPU has {len(out_cpu)}")
    grads_dev = [g.to(DEV) for g in grads_cpu]
    if isinstance(expected, Exception):
        _expect_error(op, moved, index, expected,
                      run=lambda: torch.autograd.grad(out_dev, inputs_dev, grads_dev, allow_unused=True))
        return
    actual = torch.autograd.grad(out_dev, inputs_dev, grads_dev, allow_unused=True)
    for i, (a, e) in enumerate(zip(actual, expected)):
        if e is None:
            if a is not None:
                raise CaseFailure(f"{what} grad {i}: CPU has none")
            continue
        if a is None:
            raise CaseFailure(f"{what} grad {i}: infini has none")
        _compare(a, e, f"{what} grad {i}")


@dataclass
class Outcome:
    samples: int  # how many samples ran


def run_case(op, dtype: torch.dtype, direction: str, samples: int = SAMPLES_PER_CASE) -> Outcome:
    """Runs one case; raises CaseFailure (or infini's exception) where it fails."""
    requires_grad = direction == "backward"
    pairs = _samples(op, dtype, requires_grad, samples)
    for index, (sample, runs) in enumerate(pairs):
        if requires_grad:
            _backward_sample(op, sample, runs, index)
        else:
            _forward_sample(op, sample, runs, index)
    torch.infini.synchronize()
    return Outcome(len(pairs))
