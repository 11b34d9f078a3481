"""torch.compile on providers whose device memory the host cannot address
(the Infini stack): Inductor has no code generator there, so the default
backend raises naming the backend that works, and ``backend="aot_eager"``
runs the captured graph's operators on infini, forward and backward, with
eager's results. (tests/test_compile.py covers Inductor where it generates.)"""

from __future__ import annotations

import copy

import pytest
import torch

import torch_infini
from infini_testing import fallback_where_unserved

pytestmark = pytest.mark.skipif(torch_infini._compile.host_addressable(),
                                reason="Inductor generates code here: tests/test_compile.py covers it")


@pytest.fixture(autouse=True)
def _fallback_policy():
    with fallback_where_unserved():
        yield


def mlp() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 8))


def test_default_backend_raises_naming_aot_eager():
    torch._dynamo.reset()
    model = mlp().to("infini")
    x = torch.randn(4, 16, device="infini")
    with pytest.raises(Exception, match="aot_eager"):
        torch.compile(model)(x)


def test_aot_eager_matches_eager_forward_and_backward():
    torch._dynamo.reset()
    model = mlp().to("infini")
    compiled_model = copy.deepcopy(model)
    x = torch.randn(4, 16, device="infini")
    want = model(x)
    want.sum().backward()
    got = torch.compile(compiled_model, backend="aot_eager")(x)
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), want.cpu())
    for p, q in zip(compiled_model.parameters(), model.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad.cpu())
