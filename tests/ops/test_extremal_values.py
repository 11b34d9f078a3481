"""Every unary operator of PyTorch's OpInfo database on extremal values
(infinities, NaN, -0.0, the largest and a denormal magnitude, the integer
limits) of five dtypes, against CPU: the same result dtype and values, or an
error where CPU raises one (a refusal naming the operator is neither). On
the Infini stack this found decompositions computing dtypes CPU's kernels
refuse (``softplus`` of int32, ``hardsigmoid`` of bool); the comparison is
``test_python_numbers.py``'s.
"""

from __future__ import annotations

import math

import pytest
import torch
from torch.testing._internal.common_methods_invocations import unary_ufuncs

from infini_testing import DEV
from test_python_numbers import _difference, _outcome

OPS = {op.name: op for op in unary_ufuncs if not op.name.startswith(("_refs.", "jiterator"))}

VALUES = {
    torch.float32: [math.inf, -math.inf, math.nan, -0.0, 0.0, 1e38, -1e-45, 88.8, -100.0, 0.5, -1.0, 1.0],
    torch.float16: [math.inf, -math.inf, math.nan, -0.0, 0.0, 65504.0, -6e-8, 11.1, -20.0, 0.5, -1.0, 1.0],
    torch.int32: [-(2**31), 2**31 - 1, -1, 0, 1, 7],
    torch.uint8: [0, 1, 255],
    torch.bool: [True, False],
}


def _to_cpu(result):
    return tuple(t.cpu() for t in result) if isinstance(result, tuple) else result.cpu()


@pytest.mark.parametrize("name", sorted(OPS))
def test_extremal_values_are_cpus(name):
    op = OPS[name]
    differences = []
    for dtype, values in VALUES.items():
        x = torch.tensor(values, dtype=dtype)
        xd = x.to(DEV)
        cpu = _outcome(lambda: op.op(x))
        got = _outcome(lambda: _to_cpu(op.op(xd)))  # an error reported at the read is this call's
        case = f"{name}({dtype})"
        if isinstance(cpu, tuple) and isinstance(got, tuple):
            found = [_difference(f"{case}[{i}]", c, g) for i, (c, g) in enumerate(zip(cpu, got, strict=True))]
        else:
            found = [_difference(case, cpu, got)]
        differences += [d for d in found if d is not None]
    assert not differences, "\n".join(differences)
