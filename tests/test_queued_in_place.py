"""In-place calls are queued like any other once their kind has run.

On the host runtime the generic kernel runs the first call of each kind
directly (CPU's errors and output metadata, at the call) and queues later
calls of that kind. Two kinds of call used to run directly every time, each
a synchronization that drains the stream:

- a written output that is one of the call's own inputs: ``x.mul_(2.5)``
  runs as ``mul.out(x, 2.5, out=x)``, as do the optimizers' foreach loops;
- a floating-point argument with a new value: ``p.addcdiv_(a, b,
  value=-step_size)`` in every AdamW step, whose step size changes each step.

Both are now queued, and still give CPU's values; a value CPU refuses
(a negative norm) is still refused at the call, with CPU's message.
"""

from __future__ import annotations

import os

import pytest
import torch

from infini_testing import DEV, hold, on_host

pytestmark = [
    pytest.mark.skipif(not on_host(), reason="the host runtime's direct path (the Infini stack queues "
                                             "every call with a meta run's metadata)"),
    # What these tests observe (work still pending after the call) is what
    # the verification mode removes: it synchronizes on every cache hit.
    pytest.mark.skipif(os.environ.get("TORCH_INFINI_VERIFY_CACHES") == "1",
                       reason="TORCH_INFINI_VERIFY_CACHES=1 synchronizes on every cache hit"),
]


def queued(call) -> bool:
    """Whether ``call()`` returns with work queued before it still pending
    (it was queued behind it; a direct run would have waited for it)."""
    stream = torch.infini.current_stream()
    hold(stream, 300)
    call()
    pending = not stream.query()
    torch.infini.synchronize()
    return pending


def _pair(*shape: int) -> tuple[torch.Tensor, torch.Tensor]:
    cpu = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
    return cpu, cpu.to(DEV)


@pytest.mark.parametrize("name,op", [
    ("mul_scalar", lambda x, y: x.mul_(2.5)),
    ("mul_out_self", lambda x, y: torch.mul(x, y, out=x)),
    ("add_out_self_twice", lambda x, y: torch.add(x, x, out=x)),
    ("foreach_mul", lambda x, y: torch._foreach_mul_([x, y], 0.5)),
])
def test_output_that_is_an_input_is_queued(name, op):
    x_cpu, x = _pair(4, 5)
    y_cpu, y = _pair(4, 5)
    op(x, y)  # the first call of its kind runs directly
    op(x_cpu, y_cpu)
    assert queued(lambda: op(x, y)), name
    op(x_cpu, y_cpu)
    torch.testing.assert_close(x.cpu(), x_cpu)
    torch.testing.assert_close(y.cpu(), y_cpu)


def test_new_float_values_of_an_in_place_call_are_queued():
    p_cpu, p = _pair(6)
    a_cpu, a = _pair(6)
    b_cpu, b = _pair(6)
    b_cpu.abs_().add_(1.0)
    b.abs_().add_(1.0)
    p.addcdiv_(a, b, value=-1e-3)
    p_cpu.addcdiv_(a_cpu, b_cpu, value=-1e-3)
    for step in range(2, 6):  # AdamW's step sizes: a new value each step
        value = -1e-3 / (1 - 0.9 ** step)
        assert queued(lambda: p.addcdiv_(a, b, value=value)), step
        p_cpu.addcdiv_(a_cpu, b_cpu, value=value)
    torch.testing.assert_close(p.cpu(), p_cpu)


@pytest.mark.parametrize("p,maxnorm", [(2.0, -1.0), (-1.0, 1.0)])
def test_a_value_cpu_refuses_is_refused_at_the_call(p, maxnorm):
    x_cpu, x = _pair(3, 4)
    x.renorm_(2.0, 0, 1.0)  # learned with valid values
    x_cpu.renorm_(2.0, 0, 1.0)
    with pytest.raises(RuntimeError) as cpu_error:
        x_cpu.clone().renorm_(p, 0, maxnorm)
    with pytest.raises(RuntimeError) as infini_error:
        x.renorm_(p, 0, maxnorm)
    assert str(infini_error.value) == str(cpu_error.value)
    torch.infini.synchronize()  # nothing sticky left behind
    torch.testing.assert_close(x.cpu(), x_cpu)


def test_an_output_that_is_an_input_and_is_resized_matches_cpu():
    # add.out(x, y, out=x) broadcasting x to y's shape: CPU resizes x while
    # reading it; the call is never queued (the queued path would resize
    # the input before the kernel reads it).
    results = []
    for device in ("cpu", DEV):
        x = torch.arange(3.0, device=device)
        y = torch.ones(2, 3, device=device)
        outcome = []
        for _ in range(2):
            x = torch.arange(3.0, device=device)
            try:
                torch.add(x, y, out=x)
                outcome.append(x.cpu())
            except RuntimeError as e:
                outcome.append(str(e))
        results.append(outcome)
    for cpu, infini in zip(*results):
        if isinstance(cpu, str):
            assert infini == cpu
        else:
            torch.testing.assert_close(infini, cpu)


@pytest.mark.parametrize("name,op,shapes,defined", [
    ("sum_into_its_input", lambda a, b: torch.sum(a, 0, out=a), [(2, 3), (1,)], True),
    # CPU grows the input's storage (6 -> 8 elements) before its kernel reads
    # it: its values then depend on memory it has just allocated, and differ
    # from run to run on CPU alone. Only the call's outcome and shape are CPU's.
    ("mm_into_its_input", lambda a, b: torch.mm(a, b, out=a), [(2, 3), (3, 4)], False),
])
def test_an_output_that_is_an_input_and_that_the_cpu_resizes_matches_cpu(name, op, shapes, defined):
    # CPU takes these: it resizes the input it writes while reading it. A
    # queued call would resize it first and read the resized input, so every
    # call of the kind runs directly (the later calls are the ones at stake).
    for step in range(3):
        gen = torch.Generator().manual_seed(step)
        a_cpu, b_cpu = (torch.randn(*shape, generator=gen) for shape in shapes)
        a, b = a_cpu.to(DEV), b_cpu.to(DEV)
        with pytest.warns(UserWarning, match="resized"):
            op(a_cpu, b_cpu)
        with pytest.warns(UserWarning, match="resized"):
            op(a, b)
        assert a.shape == a_cpu.shape
        if defined:
            torch.testing.assert_close(a.cpu(), a_cpu, msg=f"{name}, call {step}")

