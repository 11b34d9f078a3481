"""Every call of an operator on non-contiguous tensors gives CPU's values:
the first call, and the later ones.

The host runtime runs the first call of a kind with CPU's functional kernel
and queues later ones through the functional overload's ``out=`` twin, into
outputs laid out ahead; the Infini stack lays every call out by a meta run
and runs InfiniOps' kernels (the ATen-backed ones are CPU's ``out=``
kernels). A kernel that reads a strided input otherwise than the functional
one differs from the second call on, or on the stack from the first: CPU's
batch norm ``out=`` kernel left its statistics unwritten for a 3-D input
with its channels innermost (PyTorch 2.13), which ``BatchNorm1d`` after a
transpose passes it.

OpInfo's samples are mostly contiguous. Here every tensor of the first
three float32 samples of each ``op_db`` operator is made non-contiguous
(``noncontiguous_like``: every other element of a larger buffer), copied to
the device with the same strides, and the call made three times, each
compared with CPU's. A call the stack refuses, naming what it does not
serve, is not compared.
"""

from __future__ import annotations

import pytest
import torch
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import noncontiguous_like

from infini_testing import DEV

# Not probed, with why.
NOT_PROBED = {
    # They read the memory around a tensor's elements (its storage by
    # offset and strides): a device copy with the same strides has other
    # memory around them.
    "as_strided": "reads the storage around the elements",
    "as_strided_copy": "reads the storage around the elements",
    "as_strided_scatter": "reads the storage around the elements",
    # Its indices argument is a CPU tensor, as on CUDA: the probe moves
    # every tensor to the device.
    "tensor_split": "takes its indices from a CPU tensor",
}

# Operators that draw random numbers: each call draws anew.
RANDOM = ("normal", "bernoulli", "rand", "multinomial", "uniform", "cauchy", "exponential", "geometric",
          "log_normal", "nn.functional.rrelu", "empty", "new_empty")

OPS = {op.name: op for op in op_db
       if torch.float32 in op.supported_dtypes("cpu") and op.name not in NOT_PROBED
       and not op.name.startswith(RANDOM) and "dropout" not in op.name}


def _strided(value):
    """``value`` with each tensor of more than one element non-contiguous."""
    if isinstance(value, torch.Tensor):
        return noncontiguous_like(value) if value.layout == torch.strided and value.numel() > 1 else value
    if isinstance(value, (list, tuple)):
        return type(value)(_strided(v) for v in value)
    return value


def _on_device(value):
    """``value`` on the device, each tensor with its strides."""
    if isinstance(value, torch.Tensor):
        return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device=DEV).copy_(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_on_device(v) for v in value)
    if isinstance(value, dict):
        return {k: _on_device(v) for k, v in value.items()}
    return value


def _tensors(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)):
        return [t for r in result for t in _tensors(r)]
    return []


def _strided_samples(op):
    for sample in list(op.sample_inputs("cpu", torch.float32, requires_grad=False))[:3]:
        tensors = _tensors([sample.input, list(sample.args), list(sample.kwargs.values())])
        if any(t.layout != torch.strided for t in tensors):
            continue  # sparse samples: no strides to make
        yield _strided(sample.input), _strided(list(sample.args)), sample.kwargs


@pytest.mark.parametrize("name", sorted(OPS))
def test_every_call_on_noncontiguous_tensors_is_cpus(name):
    op = OPS[name]
    differences = []
    for x, args, kwargs in _strided_samples(op):
        try:
            expected = op(x, *args, **kwargs)
        except Exception:  # noqa: BLE001 - a call CPU refuses is not this probe's
            continue
        on_device = (_on_device(x), _on_device(args), _on_device(kwargs))
        for call in range(3):
            try:
                got = op(on_device[0], *on_device[1], **on_device[2])
            except NotImplementedError as refusal:
                if "infini" in str(refusal).lower():
                    break  # refused, naming what is not served
                raise
            for i, (g, e) in enumerate(zip(_tensors(got), _tensors(expected), strict=True)):
                try:
                    torch.testing.assert_close(g.cpu(), e, equal_nan=True)
                except AssertionError as error:
                    differences.append(f"call {call + 1}, result {i}, input strides {x.stride()}: "
                                       f"{str(error).splitlines()[0]}")
    assert not differences, "\n".join(differences)
