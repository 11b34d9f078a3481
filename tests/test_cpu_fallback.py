"""The opt-in CPU fallback (torch_infini.fallback) and the operator coverage
record, with CPU PyTorch as the oracle.

Off by default: an operator without an infini kernel raises
NotImplementedError naming it. On: it runs on the CPU with its results (and
in-place / out= arguments) back on the device; views, random and factory
operators keep raising; allow/deny lists refine it; every call is counted.
"""

from __future__ import annotations

import copy
import json
import os
import sys
import warnings
from pathlib import Path
from typing import Callable

import pytest
import torch
from torch import nn

import torch_infini
from torch_infini import fallback
from conftest import run_python

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from models import DecoderBlock  # noqa: E402  (shared with the benchmarks and test_models)

DEV = torch.device("infini:0")
ENV_VARS = ("TORCH_INFINI_CPU_FALLBACK", "TORCH_INFINI_CPU_FALLBACK_ALLOW", "TORCH_INFINI_CPU_FALLBACK_DENY",
            "TORCH_INFINI_OP_REPORT")


@pytest.fixture(autouse=True)
def _restore_fallback_state():
    """Each test starts from the process' state and leaves it as it found it."""
    was_enabled, allowed, denied = fallback.is_enabled(), fallback.allow_list(), fallback.deny_list()
    was_recording = fallback.is_recording()
    yield
    fallback.allow(allowed)
    fallback.deny(denied)
    (fallback.enable if was_enabled else fallback.disable)()
    (fallback.start_recording if was_recording else fallback.stop_recording)()


@pytest.fixture
def on():
    """The fallback on, from an empty coverage record, warnings silenced."""
    fallback.reset_coverage()
    with fallback.enabled(), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        yield


def sample(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-20, 20, shape, generator=g).to(dtype)


def needs_fallback(*ops: str) -> None:
    """Skip unless each operator still reaches the boxed fallback (no infini
    kernel): a test about the fallback must not break when one gains a kernel."""
    for op in ops:
        if torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1"):
            pytest.skip(f"{op} has an infini kernel now; pick another example")


def is_native(op: str) -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key(op, "PrivateUse1")


def rows(kind: str | None = None) -> dict[str, int]:
    """op -> calls in the coverage record (of one kind)."""
    return {r["op"]: r["calls"] for r in fallback.coverage() if kind is None or r["kind"] == kind}


def assert_matches(got, want) -> None:
    if isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert_matches(g, w)
        return
    assert isinstance(got, torch.Tensor)
    assert got.device == DEV, f"result on {got.device}, not on the infini device"
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-6)


# --- off by default -------------------------------------------------------------------


@pytest.mark.skipif(any(os.environ.get(v) for v in ENV_VARS), reason="fallback variables set for this run")
def test_off_by_default():
    assert fallback.is_enabled() is False
    assert fallback.allow_list() == [] and fallback.deny_list() == []
    assert fallback.is_recording() is False


def test_off_raises_naming_the_op_and_the_switch():
    needs_fallback("aten::cumsum.out")
    fallback.disable()
    x = sample(5).to(DEV)
    with pytest.raises(NotImplementedError, match=r"aten::cumsum") as info:
        torch.cumsum(x, 0)
    message = str(info.value)
    assert "TORCH_INFINI_CPU_FALLBACK=1" in message and "torch_infini.fallback.enable()" in message


# --- on: results equal to the CPU's -----------------------------------------------------------

OPS: dict[str, Callable] = {
    "cumsum": lambda x: torch.cumsum(x, 0),
    "mul": lambda x: torch.mul(x, x),
    "mul_scalar": lambda x: x * 3,
    "relu": torch.relu,
    "sum_dim": lambda x: torch.sum(x, dim=1),
    "sum_all": lambda x: x.sum(),
    "mean_keepdim": lambda x: x.mean(-1, keepdim=True),
    "softmax": lambda x: torch.softmax(x, dim=-1),
    "matmul": lambda x: x @ x.t(),
    "exp": torch.exp,
    "where": lambda x: torch.where(x > 0, x, -x),
    "cat": lambda x: torch.cat([x, x * 2], dim=0),
    "stack": lambda x: torch.stack([x, x], dim=1),
    "index_select": lambda x: torch.index_select(x, 1, torch.tensor([2, 0]).to(x.device)),
    "masked_fill": lambda x: x.masked_fill(x < 0, 0.5),
    "argmax": lambda x: x.argmax(dim=1),
    "pow": lambda x: x.pow(2),
    "clamp": lambda x: x.clamp(-0.5, 0.5),
    "transposed_input": lambda x: torch.cumsum(x.t(), 1),
    "sliced_input": lambda x: torch.relu(x[:, 1::2]),
    "cpu_scalar_tensor_first": lambda x: torch.tensor(2.0) * x,  # a CPU 0-dim tensor as first input
}


@pytest.mark.parametrize("name", list(OPS))
def test_unregistered_ops_match_the_cpu(on, name):
    fn = OPS[name]
    x = sample(4, 6)
    assert_matches(fn(x.to(DEV)), fn(x))


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float64, torch.float16], ids=str)
def test_dtypes(on, dtype):
    x = sample(3, 5, dtype=dtype)
    assert_matches(torch.cumsum(x.to(DEV), 1), torch.cumsum(x, 1))
    assert_matches(x.to(DEV).max(dim=0).values, x.max(dim=0).values)


def test_in_place(on):
    x = sample(4, 6)
    d = x.to(DEV)
    ptr = d.data_ptr()
    assert d.mul_(2) is d
    assert d.clamp_(0, 1) is d
    assert d.data_ptr() == ptr
    assert_matches(d, x.clone().mul_(2).clamp_(0, 1))


def test_in_place_on_views_writes_through_to_the_base(on):
    x = sample(4, 6)
    d = x.to(DEV)
    d[1:3].mul_(-1)
    d.t()[0].clamp_(max=0)  # a strided view of column 0
    want = x.clone()
    want[1:3].mul_(-1)
    want.t()[0].clamp_(max=0)
    assert_matches(d, want)


def test_out_arguments(on):
    a, b = sample(3, 4, seed=1), sample(3, 4, seed=2)
    da, db = a.to(DEV), b.to(DEV)
    out = torch.empty(3, 4, device=DEV)
    assert torch.mul(da, db, out=out) is out
    assert_matches(out, a * b)
    # An empty out= is resized, as on the CPU.
    resized = torch.empty(0, device=DEV)
    torch.cumsum(da, 1, out=resized)
    assert_matches(resized, torch.cumsum(a, 1))


def test_multi_output(on):
    x = sample(5, 7)
    d = x.to(DEV)
    assert_matches(tuple(torch.max(d, dim=0)), tuple(torch.max(x, dim=0)))
    assert_matches(tuple(torch.sort(d, dim=1)), tuple(torch.sort(x, dim=1)))
    assert_matches(tuple(torch.topk(d, 3)), tuple(torch.topk(x, 3)))
    values, indices = torch.empty(0, device=DEV), torch.empty(0, dtype=torch.long, device=DEV)
    torch.min(d, dim=1, out=(values, indices))
    assert_matches((values, indices), tuple(torch.min(x, dim=1)))


def test_scalars_reach_python(on):
    x = sample(3, 3)
    d = x.to(DEV)
    assert d.sum().item() == pytest.approx(x.sum().item())
    assert bool((d > 100).any()) is False
    assert "device='infini:0'" in repr(d)


def test_zeros_and_full_work_through_in_place_fills(on):
    """torch.zeros/full are ATen compositions (empty + an in-place fill): the
    fill falls back, the result is an infini tensor."""
    assert_matches(torch.zeros(2, 3, device=DEV), torch.zeros(2, 3))
    assert_matches(torch.full((2,), 7.0, device=DEV), torch.full((2,), 7.0))


def test_autograd_through_fallback_ops(on):
    x = sample(3, 4)
    d = x.to(DEV).requires_grad_()
    c = x.clone().requires_grad_()
    (torch.relu(d) * d).sum().backward()
    (torch.relu(c) * c).sum().backward()
    assert_matches(d.grad, c.grad)


def test_ordered_with_the_current_stream(on):
    """Work queued before a fallback on a busy stream is seen by it, and its
    result is seen by work queued after it."""
    x = sample(64)
    d = x.to(DEV)
    s = torch.infini.Stream()
    with torch.infini.stream(s):
        if not torch_infini._C._test_enqueue_delay(s.stream_id, s.device_index, 50.0):
            pytest.skip("the provider cannot queue host work")
        d.add_(1)  # queued behind the delay
        y = torch.cumsum(d, 0)  # fallback: must see the add
        z = y + y  # native, queued after the fallback's result
    torch.infini.current_stream().wait_stream(s)
    assert_matches(z, 2 * torch.cumsum(x + 1, 0))


def test_mixed_infini_devices_raise():
    script = """
import json, torch, torch_infini
torch_infini.fallback.enable()
a = torch.ones(3).to("infini:0"); b = torch.ones(3).to("infini:1")
r = {"same_device_1": torch.mul(b, b).device.index}
try:
    torch.dot(a, b)  # not structured: no device check before the fallback
except RuntimeError as e:
    r["error"] = str(e).splitlines()[0]
print("RESULT" + json.dumps(r))
"""
    proc = run_python(script, env={"TORCH_INFINI_HOST_DEVICES": "2", "TORCH_INFINI_PROVIDER": "host"})
    assert proc.returncode == 0, proc.stderr
    r = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT")][-1][6:])
    assert r["same_device_1"] == 1
    assert "same infini device" in r["error"] and "infini:0" in r["error"] and "infini:1" in r["error"]


# --- what keeps raising -----------------------------------------------------------------


@pytest.mark.parametrize("call,op", [
    # Reached through the dispatcher with a real tensor: the fallback refuses
    # views before any dtype check. (Tensor.unfold has a native kernel now.)
    (lambda x: torch.ops.aten.view_as_real.default(x), "aten::view_as_real"),
    (lambda x: torch.view_as_complex(x), "aten::view_as_complex"),
])
def test_view_operators_keep_raising(on, call, op):
    needs_fallback(op)
    with pytest.raises(NotImplementedError, match=op) as info:
        call(sample(4, 2).to(DEV))
    assert "view operator" in str(info.value)
    assert rows("unsupported").get(op) == 1


def test_native_views_are_not_affected(on):
    x = sample(4, 4)
    d = x.to(DEV)
    assert d.unfold(0, 2, 1).data_ptr() == d.data_ptr()  # a native view kernel
    assert_matches(d.unfold(0, 2, 1).contiguous(), x.unfold(0, 2, 1).contiguous())
    assert d.diagonal().data_ptr() == d.data_ptr()  # ATen's composite view, on device
    assert_matches(d.diagonal().contiguous(), x.diagonal().contiguous())


# Random operators without an infini kernel (uniform_, normal_, bernoulli_,
# randperm, multinomial, native_dropout, ... have one: tests/ops/test_random.py).
@pytest.mark.parametrize("call,op", [
    (lambda: torch.poisson(torch.ones(3).to(DEV)), "aten::poisson"),
    (lambda: torch.binomial(torch.ones(3).to(DEV), torch.full((3,), 0.5).to(DEV)), "aten::binomial"),
    (lambda: torch._standard_gamma(torch.ones(3).to(DEV)), "aten::_standard_gamma"),
    (lambda: torch._sample_dirichlet(torch.ones(3).to(DEV)), "aten::_sample_dirichlet"),
    (lambda: nn.functional.rrelu(torch.ones(3).to(DEV), training=True), "aten::rrelu_with_noise"),
])
def test_random_operators_keep_raising(on, call, op):
    needs_fallback(op)
    with pytest.raises(NotImplementedError, match=op) as info:
        call()
    assert "random operator" in str(info.value)


def test_factory_operators_keep_raising(on):
    needs_fallback("aten::tril_indices")
    with pytest.raises(NotImplementedError, match="aten::tril_indices") as info:
        torch.tril_indices(3, 3, device=DEV)
    assert "factory operator" in str(info.value)


def test_dropout_outside_training_is_not_random(on):
    x = sample(4).to(DEV)
    assert nn.functional.dropout(x, 0.5, training=False) is x


# --- warnings -----------------------------------------------------------------------


def test_one_warning_per_operator():
    needs_fallback("aten::cumsum.out", "aten::flip")
    script = """
import json, warnings, torch, torch_infini
torch_infini.fallback.enable()
x = torch.arange(6.0).to("infini")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for _ in range(3):
        torch.cumsum(x, 0)
        torch.flip(x, [0])
    torch.cumsum(x, 0, out=torch.empty(0, device="infini"))  # the same aten::cumsum.out: no new warning
print("RESULT" + json.dumps([str(w.message) for w in caught]))
"""
    proc = run_python(script, env={"TORCH_INFINI_PROVIDER": "host"})
    assert proc.returncode == 0, proc.stderr
    messages = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT")][-1][6:])
    assert len(messages) == 2, messages
    assert "'aten::cumsum.out'" in messages[0] and "CPU fallback" in messages[0]
    assert "'aten::flip'" in messages[1]


# --- coverage -----------------------------------------------------------------------


def test_coverage_counts_the_calls_made(on):
    needs_fallback("aten::cumsum.out", "aten::flip", "aten::fmod.Tensor_out")
    x = sample(4, 4).to(DEV)
    for _ in range(3):
        torch.cumsum(x, 0)
    for _ in range(2):
        torch.flip(x, [1])
    x.fmod_(2)
    fell_back = rows("fallback")
    assert fell_back == {"aten::cumsum.out": 3, "aten::flip": 2, "aten::fmod.Tensor_out": 1}
    assert all(r["time_ms"] > 0 for r in fallback.coverage())
    fallback.reset_coverage()
    assert fallback.coverage() == []


def test_unsupported_calls_are_counted():
    needs_fallback("aten::cumsum.out")
    fallback.reset_coverage()
    fallback.disable()
    x = sample(4).to(DEV)
    for _ in range(2):
        with pytest.raises(NotImplementedError):
            torch.cumsum(x, 0)
    assert rows("unsupported") == {"aten::cumsum.out": 2}


def test_native_calls_are_counted_only_while_recording(on):
    needs_fallback("aten::cumsum.out")
    x = sample(4).to(DEV)
    assert not fallback.is_recording()
    x + x
    assert rows("native") == {}, "native calls counted while not recording"
    with fallback.recording():
        assert fallback.is_recording()
        for _ in range(4):
            x + x
        torch.cumsum(x, 0)
    assert not fallback.is_recording()
    x + x
    native = rows("native")
    assert native["aten::add.Tensor"] == 4
    assert rows("fallback") == {"aten::cumsum.out": 1}
    # The fallback's own copies are part of the fallback, not counted alone.
    assert "aten::_copy_from" not in native


def test_recording_counts_composite_operators_and_their_parts(on):
    needs_fallback("aten::cumsum.out")
    x = sample(2, 4).to(DEV)
    with fallback.recording():
        torch.cumsum(x.t(), 0)  # t: ATen's composite view; cumsum: composite over cumsum.out
    report = {(r["op"], r["kind"]): r["calls"] for r in fallback.coverage()}
    assert report[("aten::t", "composite")] == 1
    assert report[("aten::cumsum", "composite")] == 1
    assert report[("aten::cumsum.out", "fallback")] == 1
    assert report[("aten::as_strided", "native")] >= 1


def test_a_call_of_the_generic_kernel_that_falls_back_is_counted_once(on):
    """The generic kernel is registered for aten::mm (so its calls are
    "native" by route); a call it hands to the CPU fallback (int64: InfiniOps'
    Gemm is floating-point only) is counted as a fallback only, never as both.
    On the host runtime the same call runs natively: counted once, as that."""
    a = torch.arange(6).reshape(2, 3)
    b = torch.arange(12).reshape(3, 4)
    with fallback.recording():
        got = torch.mm(a.to(DEV), b.to(DEV))
    assert torch.equal(got.cpu(), a @ b)
    kinds = {r["kind"]: r["calls"] for r in fallback.coverage() if r["op"] == "aten::mm"}
    on_host = torch_infini.diagnostics()["provider"] == "host"
    assert kinds == ({"native": 1} if on_host else {"fallback": 1}), fallback.coverage()


def test_format_coverage(on):
    needs_fallback("aten::cumsum.out")
    assert "no operator" in fallback.format_coverage([])
    torch.cumsum(sample(3).to(DEV), 0)
    text = fallback.format_coverage()
    assert "aten::cumsum.out" in text and "fallback" in text and "calls" in text


def test_report_printed_at_exit():
    needs_fallback("aten::cumsum.out")
    script = """
import torch, torch_infini
x = torch.arange(4.0).to("infini")
torch.cumsum(x, 0)
x + x
"""
    proc = run_python(script, env={"TORCH_INFINI_PROVIDER": "host", "TORCH_INFINI_CPU_FALLBACK": "1",
                                   "TORCH_INFINI_OP_REPORT": "1"})
    assert proc.returncode == 0, proc.stderr
    report = proc.stderr[proc.stderr.index("torch_infini operator coverage"):]
    lines = {line.split()[0]: line.split()[1:3] for line in report.splitlines()[3:]}
    assert lines["aten::cumsum.out"] == ["fallback", "1"]
    assert lines["aten::add.Tensor"] == ["native", "1"]


# --- allow and deny lists --------------------------------------------------------------


def test_deny_list_turns_a_fallback_back_into_an_error(on):
    needs_fallback("aten::cumsum.out", "aten::flip")
    x = sample(4).to(DEV)
    fallback.deny(["aten::cumsum"])
    assert fallback.deny_list() == ["aten::cumsum"]
    with pytest.raises(NotImplementedError, match="aten::cumsum.out") as info:
        torch.cumsum(x, 0)
    assert "deny-list" in str(info.value)
    assert_matches(torch.flip(x, [0]), torch.flip(x.cpu(), [0]))  # others still fall back
    fallback.deny(None)
    torch.cumsum(x, 0)


def test_list_names_with_and_without_overload(on):
    needs_fallback("aten::cumsum.out")
    x = sample(4).to(DEV)
    fallback.deny(["aten::cumsum.out"])  # exactly the overload that arrives
    with pytest.raises(NotImplementedError, match="deny-list"):
        torch.cumsum(x, 0)
    fallback.deny(["aten::cumsum_"])  # another operator (the in-place one), not an overload
    torch.cumsum(x, 0)
    fallback.deny("cumsum")  # a comma-separated string; no namespace means aten
    assert fallback.deny_list() == ["aten::cumsum"]
    with pytest.raises(NotImplementedError, match="deny-list"):
        torch.cumsum(x, 0)


def test_allow_list_limits_the_fallback(on):
    needs_fallback("aten::cumsum.out", "aten::flip")
    x = sample(4).to(DEV)
    fallback.allow(["aten::flip"])
    torch.flip(x, [0])
    with pytest.raises(NotImplementedError, match="allow-list"):
        torch.cumsum(x, 0)
    fallback.deny(["aten::flip"])  # the deny-list wins
    with pytest.raises(NotImplementedError, match="deny-list"):
        torch.flip(x, [0])


def test_unknown_names_are_refused():
    with pytest.raises(RuntimeError, match="aten::cumsumm"):
        fallback.deny(["aten::cumsumm"])
    with pytest.raises(RuntimeError, match="not an ATen operator"):
        fallback.allow(["cumsum.nosuchoverload"])
    fallback.allow(["mylib::custom_op"])  # other namespaces may load later
    assert fallback.allow_list() == ["mylib::custom_op"]


# --- switches --------------------------------------------------------------------------


def test_enable_disable():
    fallback.enable()
    assert fallback.is_enabled()
    fallback.disable()
    assert not fallback.is_enabled()


def test_context_manager_restores_the_previous_state():
    fallback.disable()
    with fallback.enabled():
        assert fallback.is_enabled()
        with fallback.enabled(False):
            assert not fallback.is_enabled()
        assert fallback.is_enabled()
    assert not fallback.is_enabled()
    with pytest.raises(ZeroDivisionError):
        with fallback.enabled():
            1 / 0
    assert not fallback.is_enabled()
    fallback.enable()
    with pytest.raises(KeyError):
        with fallback.enabled(False):
            raise KeyError("x")
    assert fallback.is_enabled()


def test_environment_variables():
    needs_fallback("aten::cumsum.out", "aten::flip", "aten::roll")
    script = """
import json, torch, torch_infini
from torch_infini import fallback
x = torch.arange(4.0).to("infini")
r = {"enabled": fallback.is_enabled(), "allow": fallback.allow_list(), "deny": fallback.deny_list()}
r["cumsum"] = torch.cumsum(x, 0).cpu().tolist()
try:
    torch.flip(x, [0])
except NotImplementedError as e:
    r["flip"] = "deny-list" in str(e)
try:
    torch.roll(x, 1)
except NotImplementedError as e:
    r["roll"] = "allow-list" in str(e)
print("RESULT" + json.dumps(r))
"""
    env = {"TORCH_INFINI_PROVIDER": "host", "TORCH_INFINI_CPU_FALLBACK": "1",
           "TORCH_INFINI_CPU_FALLBACK_ALLOW": "aten::cumsum, aten::flip",
           "TORCH_INFINI_CPU_FALLBACK_DENY": "flip"}
    proc = run_python(script, env=env)
    assert proc.returncode == 0, proc.stderr
    r = json.loads([l for l in proc.stdout.splitlines() if l.startswith("RESULT")][-1][6:])
    assert r == {"enabled": True, "allow": ["aten::cumsum", "aten::flip"], "deny": ["aten::flip"],
                 "cumsum": [0.0, 1.0, 3.0, 6.0], "flip": True, "roll": True}


@pytest.mark.parametrize("variable,value", [("TORCH_INFINI_CPU_FALLBACK", "maybe"),
                                            ("TORCH_INFINI_CPU_FALLBACK_DENY", "aten::no_such_op"),
                                            ("TORCH_INFINI_OP_REPORT", "sometimes")])
def test_malformed_variables_name_themselves(variable, value):
    script = """
import torch, torch_infini
torch_infini.fallback.is_enabled()
"""
    proc = run_python(script, env={"TORCH_INFINI_PROVIDER": "host", variable: value})
    assert proc.returncode != 0
    assert variable in proc.stderr and value in proc.stderr


# --- models -------------------------------------------------------------------------


def _partially_native() -> set[str] | None:
    """Native operators the provider declares it cannot run for some calls:
    those calls take the fallback (add with alpha where the provider's
    support matrix has no alpha). None: any native operator may, on the
    Infini stack, whose provider refuses the calls InfiniOps cannot run."""
    if torch_infini.diagnostics()["provider"] != "host":
        return None
    add = next(r for r in torch_infini.operator_table() if r["op"] == "aten::add.Tensor")
    return set() if add["alpha"] else {"aten::add.out"}


def check_report() -> None:
    """Every call ran; each operator is reported as what it is: native ones
    (and, on an InfiniOps built WITH_TORCH=ON, ATen-backed ones) have an
    infini kernel, fallback ones do not (or their provider declares it cannot
    run that call)."""
    report = fallback.coverage()
    assert report
    partial = _partially_native()
    for row in report:
        assert row["kind"] in {"native", "aten-backed", "composite", "fallback"}, row
        if row["kind"] in ("native", "aten-backed"):
            assert is_native(row["op"]), row
        if row["kind"] == "fallback":
            assert not is_native(row["op"]) or partial is None or row["op"] in partial, row
    assert any(row["kind"] == "native" for row in report)


def _report(record_property, name: str) -> str:
    text = fallback.format_coverage()
    record_property(f"coverage_{name}", text)
    print(f"\n[{name}]\n{text}")
    return text


def test_mlp_training_step_matches_cpu(on, record_property):
    """4 x (Linear 512->512 + ReLU), batch 8: forward, MSE loss, backward and
    one SGD step (momentum) on infini with the fallback on, equal to the CPU."""
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Linear(512, 512), nn.ReLU()]
    cpu_model = nn.Sequential(*layers)
    model = copy.deepcopy(cpu_model).to(DEV)
    x, target = sample(8, 512, seed=1), sample(8, 512, seed=2)
    cpu_opt = torch.optim.SGD(cpu_model.parameters(), lr=0.1, momentum=0.9)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    cpu_loss = nn.functional.mse_loss(cpu_model(x), target)
    cpu_loss.backward()
    cpu_opt.step()
    with fallback.recording():
        loss = nn.functional.mse_loss(model(x.to(DEV)), target.to(DEV))
        loss.backward()
        opt.step()
        torch.infini.synchronize()

    assert loss.device == DEV
    torch.testing.assert_close(loss.cpu(), cpu_loss.detach(), rtol=1e-5, atol=1e-6)
    for (name, got), want in zip(model.named_parameters(), cpu_model.parameters()):
        torch.testing.assert_close(got.grad.cpu(), want.grad, rtol=1e-4, atol=1e-6, msg=name)
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-4, atol=1e-6, msg=name)
    _report(record_property, "mlp")
    check_report()


def test_llama_style_block_forward_matches_cpu(on, record_property):
    torch.manual_seed(0)
    cpu_block = DecoderBlock().eval()
    block = copy.deepcopy(cpu_block).to(DEV)
    x = sample(2, 16, 64, seed=3)
    with torch.no_grad():
        want = cpu_block(x)
        with fallback.recording():
            got = block(x.to(DEV))
            torch.infini.synchronize()
    assert_matches(got, want)
    _report(record_property, "llama_block")
    check_report()


def test_fallback_writes_back_arguments_its_schema_does_not_mark():
    """native_batch_norm updates running_mean/running_var in place although
    its schema does not mark them as written: the fallback compares every
    argument before and after and copies back what the CPU kernel changed
    (once the BatchNorm buffers of a model trained through it stayed 0 and 1)."""
    x = torch.randn(8, 3, 4, 4)
    mean, var = torch.zeros(3), torch.ones(3)
    out_cpu, _, _ = torch.native_batch_norm(x, None, None, mean, var, True, 0.1, 1e-5)
    mean_d, var_d = torch.zeros(3).to("infini"), torch.ones(3).to("infini")
    out = torch_infini._C._test_cpu_fallback_batch_norm(x.to("infini"), mean_d, var_d)
    assert out.device.type == "infini"
    torch.testing.assert_close(out.cpu(), out_cpu)
    torch.testing.assert_close(mean_d.cpu(), mean)
    torch.testing.assert_close(var_d.cpu(), var)
    assert not torch.equal(mean_d.cpu(), torch.zeros(3))
