"""TORCH_INFINI_ENFORCE_BACKEND / torch_infini.backend_support.enforce: the
host runtime refuses, or sends through the counted CPU fallback, every call
the chosen InfiniOps backend would not serve natively; what the device runs
itself (views, copies, fills, allocation) always runs. CPU PyTorch is the
oracle for the values."""

from __future__ import annotations

import pytest
import torch

from torch_infini import backend_support as support
from torch_infini import fallback
from conftest import run_python
from infini_testing import on_host

DEV = torch.device("infini:0")


@pytest.fixture
def enforcing():
    """Enforces a backend inside the test, and turns it off after."""
    was_enabled = fallback.is_enabled()
    yield support.enforce
    support.enforce(None)
    fallback.disable() if not was_enabled else fallback.enable()


def _operands():
    torch.manual_seed(0)
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    return a, b, a.to(DEV), b.to(DEV)


def test_refuses_what_the_backend_does_not_serve(enforcing):
    a, b, x, y = _operands()
    enforcing("cambricon")
    assert support.enforcement() == ("cambricon", support.CURRENT_PIN)
    # Gemm is native on Cambricon; views, copies and fills are the device's.
    # On the host runtime mm is CPU's kernel; on the stack, InfiniOps' Gemm,
    # whose sums round in another order than CPU's BLAS.
    exact = {"rtol": 0, "atol": 0} if on_host() else {}
    torch.testing.assert_close(torch.mm(x, y).cpu(), torch.mm(a, b), **exact)
    torch.testing.assert_close(x.t().contiguous().cpu(), a.t().contiguous())
    torch.testing.assert_close(torch.zeros(3, device=DEV).cpu(), torch.zeros(3))
    with pytest.raises(NotImplementedError) as caught:
        torch.erf(x)
    message = str(caught.value)
    assert "aten::erf" in message and "'cambricon'" in message and support.CURRENT_PIN in message
    assert "TORCH_INFINI_ENFORCE_BACKEND=cambricon," in message


def test_aten_backed_operators_with_torch(enforcing):
    a, _, x, _ = _operands()
    enforcing("cambricon", with_torch=True)
    torch.testing.assert_close(torch.erf(x).cpu(), torch.erf(a), rtol=0, atol=0)
    with pytest.raises(NotImplementedError, match="native_layer_norm"):
        torch.ops.aten.native_layer_norm.default(x, [4], None, None, 1e-5)


def test_the_fallback_runs_what_is_refused_and_counts_it(enforcing):
    a, _, x, _ = _operands()
    enforcing("nvidia")
    fallback.enable()
    with fallback.recording():
        # An operator no other test or decomposition falls back with: the
        # fallback warns once per operator and process.
        with pytest.warns(UserWarning, match="CPU fallback"):
            got = torch.special.i0e(x)
        torch.testing.assert_close(got.cpu(), torch.special.i0e(a), rtol=0, atol=0)
        rows = fallback.coverage()
    assert any(r["op"].startswith("aten::special_i0e") and r["kind"] == "fallback" and r["calls"] == 1
               for r in rows)
    assert not any(r["op"].startswith("aten::special_i0e") and r["kind"] == "native" for r in rows)


def test_another_pin_and_off_again(enforcing):
    _, _, x, _ = _operands()
    enforcing("nvidia", support.BASELINE_PIN)
    assert support.enforcement() == ("nvidia", support.BASELINE_PIN)
    with pytest.raises(NotImplementedError, match=support.BASELINE_PIN):
        torch.erf(x)
    support.enforce(None)
    assert support.enforcement() is None
    torch.erf(x)


def test_served_overloads_follow_the_verdicts():
    served = set(support.served_overloads("iluvatar"))
    for overload in support.aten_bindings():
        verdict = support.classify(overload, "iluvatar")
        if verdict.status == "native":
            assert overload in served, overload
        elif verdict.status in ("aten", "unserved"):
            assert overload not in served, overload


def test_the_environment_variable():
    done = run_python("""
        import torch, torch_infini
        from torch_infini import backend_support
        print(backend_support.enforcement())
        x = torch.ones(3, device="infini")
        print((x * 2).cpu().tolist())  # mul: native on NVIDIA
        try:
            torch.erf(x)  # ATen-backed only there
        except NotImplementedError as e:
            print("refused:", str(e).split(" ")[0])
    """, env={"TORCH_INFINI_ENFORCE_BACKEND": "nvidia"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [f"('nvidia', '{support.CURRENT_PIN}')", "[2.0, 2.0, 2.0]",
                                        "refused: aten::erf"]


def test_the_tables_are_enforced_like_the_generic_kernel():
    """sub, mul (ops/arithmetic.cpp) and softmax (ops/rowwise.cpp) have
    kernels of the host runtime's own; a backend where InfiniOps serves them
    ATen-backed only refuses them all the same: sub on NVIDIA, mul on
    Cambricon, softmax on Cambricon (and wherever the generic kernel refuses
    a strided one). add stays the device's own."""
    program = """
        import torch, torch_infini
        x = torch.ones(3, device="infini")
        m = torch.ones(3, 2, device="infini").t()  # strided: the generic kernel's
        calls = (("mul", lambda: x * x), ("sub", lambda: x - x), ("sub_", lambda: x.clone().sub_(x)),
                 ("add", lambda: x + x), ("softmax", lambda: torch.softmax(x, -1)),
                 ("softmax", lambda: torch.softmax(m, -1)))
        for name, call in calls:
            try:
                call().cpu()
                print(name, "served")
            except NotImplementedError as e:
                print(name, "refused:", str(e).split(" ")[0])
    """
    verdicts = {}
    for backend in ("nvidia", "cambricon"):
        done = run_python(program, env={"TORCH_INFINI_ENFORCE_BACKEND": backend})
        assert done.returncode == 0, done.stderr
        verdicts[backend] = done.stdout.splitlines()
    assert verdicts["nvidia"][:4] == ["mul served", "sub refused: aten::sub.Tensor",
                                      "sub_ refused: aten::sub_.Tensor", "add served"]
    assert verdicts["cambricon"] == ["mul refused: aten::mul.Tensor", "sub refused: aten::sub.Tensor",
                                     "sub_ refused: aten::sub_.Tensor", "add served",
                                     "softmax refused: aten::_softmax", "softmax refused: aten::_softmax"]
    # The table's softmax gets the generic kernel's verdict (a strided input
    # goes there), whatever the build's binding makes it on NVIDIA.
    assert verdicts["nvidia"][4] == verdicts["nvidia"][5], verdicts["nvidia"]


@pytest.mark.parametrize("value", ["cuda", "nvidia,abcdef1", "nvidia,1f6f9c2,2962714", ""])
def test_a_malformed_value_names_the_variable(value):
    with pytest.raises(RuntimeError) as caught:
        support.parse_enforcement(value)
    assert str(caught.value).startswith(
        f"TORCH_INFINI_ENFORCE_BACKEND='{value}' is invalid: expected BACKEND[,PIN][,torch]")


def test_parse_enforcement():
    assert support.parse_enforcement("hygon") == ("hygon", support.CURRENT_PIN, False)
    assert support.parse_enforcement("metax, 2962714, torch") == ("metax", support.BASELINE_PIN, True)


def test_a_malformed_variable_fails_the_import():
    done = run_python("import torch_infini", env={"TORCH_INFINI_ENFORCE_BACKEND": "cuda"})
    assert done.returncode != 0
    assert "TORCH_INFINI_ENFORCE_BACKEND='cuda' is invalid: expected BACKEND[,PIN][,torch]" in done.stderr


@pytest.mark.skipif(not on_host(), reason="enforcement diverts the host runtime's calls; the stack refuses by itself")
def test_a_decompositions_operators_do_not_fall_back_one_by_one(enforcing):
    """With the fallback on, an operator a decomposition calls that the
    backend does not serve refuses instead of falling back: the
    decomposition gives way, and the operator it decomposes falls back whole
    (one copy each way, CPU's own kernel)."""
    from torch_infini import _C

    a = torch.rand(6) + 0.5
    x = a.to("infini")
    enforcing("nvidia")
    fallback.enable()
    # polygamma's decomposition (n >= 2) calls special_zeta, ATen-backed only on NVIDIA.
    refusal = _C._decompose_for_test("aten::polygamma", "", 2, x)
    assert isinstance(refusal, str) and refusal.startswith("aten::special_zeta is not served")
    with fallback.recording():
        with pytest.warns(UserWarning, match="CPU fallback"):
            got = torch.polygamma(2, x)
        rows = fallback.coverage()
    assert torch.equal(got.cpu(), torch.polygamma(2, a))
    assert any(r["op"] == "aten::polygamma" and r["kind"] == "fallback" for r in rows)
    assert not any(r["op"].startswith("aten::special_zeta") and r["kind"] == "fallback" for r in rows)
