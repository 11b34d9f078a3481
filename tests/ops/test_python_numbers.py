"""Every binary operator of PyTorch's OpInfo database that takes a Python
number as its second operand, called with numbers (as Python passes them,
and as CPU 0-dim tensors) that stress how a number is
read beside a tensor (beyond float32's range, NaN, -0.0, a bool, an integer
past uint8's range, a fraction beside an integer tensor) on tensors of six
dtypes, against CPU: the same result dtype and values, or an error where CPU
raises one. A refusal naming the operator (NotImplementedError, the Infini
stack's answer for what InfiniOps does not serve) is not a wrong result.
What still differs on the Infini stack is in the reviewed list
(``STACK_NUMBER_DIFFERENCES`` in ``opinfo_known_failures.py``), with why.

A probe of this kind found four wrong results and errors in add, sub and mul
(``float32 + 1e39`` raising where CPU gives inf; ``int32 * 1e39`` giving 0
where CPU gives nan; ``bool - 3`` computed where CPU raises); this keeps it
standing over every such operator.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing._internal.common_methods_invocations import binary_ufuncs

from infini_testing import DEV, on_host
from opinfo_known_failures import STACK_NUMBER_DIFFERENCES

# OpInfo's binary ufuncs that take a Python number on the right, by name;
# PyTorch's references (_refs.*) and the CUDA-only jiterator entries left out.
OPS = {op.name: op for op in binary_ufuncs
       if op.supports_rhs_python_scalar and not op.name.startswith(("_refs.", "jiterator"))}

NUMBERS = [0.1, -2.5, 1e39, math.nan, -0.0, 300, -1, 0, True, 2]

VALUES = {
    torch.float32: [-2.0, -0.0, 0.5, 3.0, math.inf, math.nan],
    torch.float16: [-2.0, -0.0, 0.5, 3.0, math.inf, math.nan],
    torch.int32: [-3, 0, 1, 7, 100],
    torch.int64: [-3, 0, 1, 7, 100],
    torch.uint8: [0, 1, 7, 200],
    torch.bool: [True, False],
}


def _outcome(fn):
    try:
        return fn()
    except Exception as error:  # noqa: BLE001 - the error is the outcome compared
        return error


def _difference(case: str, cpu, got) -> str | None:
    """What differs between CPU's outcome and the device's in ``case``, or
    None (also for a difference the reviewed list holds, on the stack)."""
    if not on_host() and case in STACK_NUMBER_DIFFERENCES:
        return None
    if isinstance(got, NotImplementedError) and "infini" in str(got).lower() and not isinstance(cpu, Exception):
        return None  # refused, naming what is not served
    if isinstance(cpu, Exception):
        if isinstance(got, (type(cpu), NotImplementedError)):
            return None
        return f"{case}: CPU raises {type(cpu).__name__}: {cpu}; infini gives {got!r}"[:400]
    if isinstance(got, Exception):
        return f"{case}: CPU gives a result; infini raises {type(got).__name__}: {got}"[:400]
    cpu_t, got_t = torch.as_tensor(cpu), torch.as_tensor(got)
    if cpu_t.dtype != got_t.dtype or cpu_t.shape != got_t.shape:
        return f"{case}: CPU gives {cpu_t.dtype} {tuple(cpu_t.shape)}, infini {got_t.dtype} {tuple(got_t.shape)}"
    try:
        torch.testing.assert_close(got_t, cpu_t, equal_nan=True)
    except AssertionError:
        return f"{case}: CPU gives {cpu_t.tolist()}, infini {got_t.tolist()}"
    return None


# A number as Python passes it (a wrapped number), or as a CPU 0-dim
# tensor, which CUDA takes beside device tensors and which promotes otherwise.
FORMS = {"number": lambda v: v, "CPU 0-dim tensor": torch.tensor}


def _case(name: str, dtype: torch.dtype, number, form: str) -> str:
    return f"{name}({dtype}, {number!r})" if form == "number" else f"{name}({dtype}, tensor({number!r}))"


@pytest.mark.parametrize("form", sorted(FORMS))
@pytest.mark.parametrize("name", sorted(OPS))
def test_a_python_number_beside_a_tensor_is_cpus(name, form):
    op = OPS[name]
    differences = []
    for dtype, values in VALUES.items():
        x = torch.tensor(values, dtype=dtype)
        xd = x.to(DEV)
        for number in NUMBERS:
            operand = FORMS[form](number)
            cpu = _outcome(lambda: op.op(x, operand))
            # Read back inside: an error the device reports at the next
            # synchronization (an integer division by zero) is this call's.
            got = _outcome(lambda: op.op(xd, operand).cpu())
            difference = _difference(_case(name, dtype, number, form), cpu, got)
            if difference is not None:
                differences.append(difference)
    assert not differences, "\n".join(differences)


def test_the_listed_differences_name_probed_cases():
    cases = {_case(name, dtype, number, form) for name in OPS for dtype in VALUES for number in NUMBERS
             for form in FORMS}
    assert not sorted(set(STACK_NUMBER_DIFFERENCES) - cases)
