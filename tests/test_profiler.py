"""The profiler on infini: each operator recorded once, device time per
operator, and a device lane per stream in the chrome trace, with the kernels
at the times the stream's worker really ran them.

The oracle is the profiler's CUDA behaviour: one event per operator call,
kernels (device events) linked to the operator that launched them, lying
between that launch and the synchronize that ends the profiled region.
"""

from __future__ import annotations

import json

import pytest
import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile, record_function

import torch_infini
from conftest import run_python
from infini_testing import fallback_env, fallback_where_unserved, on_host

ACTIVITIES = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
# The profiler's operator times come from a cycle counter converted to wall
# time by a linear fit; device times are read from the wall clock. The two
# agree to well under this (microseconds), which only absorbs that rounding.
CLOCK_SLACK_US = 20.0



@pytest.fixture(autouse=True)
def _fallback_policy():
    """On the Infini stack InfiniOps serves few of the model's operators
    (sum, relu at some pins): the rest take the opt-in fallback there."""
    with fallback_where_unserved():
        yield


needs_host = pytest.mark.skipif(
    not on_host(), reason="device work is timed on the host runtime's workers")


def model_step(lin: torch.nn.Module, x: torch.Tensor) -> float:
    return torch.relu(lin(x)).sum().item()


@pytest.fixture
def warm_model():
    """A small linear model whose op kinds have run once (queued path)."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(32, 16).to("infini")
    x = torch.randn(64, 32, device="infini")
    model_step(lin, x)
    torch.infini.synchronize()
    return lin, x


def profiled_step(lin, x):
    with profile(activities=ACTIVITIES) as prof:
        value = model_step(lin, x)
        with record_function("end_of_region"):
            torch.infini.synchronize()
    return prof, value


def device_events(prof):
    return [e for e in prof.events() if e.device_type == DeviceType.PrivateUse1]


def counts(prof, names):
    by_key = {row.key: row for row in prof.key_averages()}
    return {name: by_key[name].count if name in by_key else 0 for name in names}


OPS = ["aten::linear", "aten::addmm", "aten::relu", "aten::sum", "aten::item",
       "aten::_local_scalar_dense"]


def test_each_op_recorded_once(warm_model):
    lin, x = warm_model
    prof, value = profiled_step(lin, x)
    assert counts(prof, OPS) == {name: 1 for name in OPS}
    expected = torch.relu(lin.cpu()(x.cpu())).sum().item()
    assert value == pytest.approx(expected, rel=1e-5)


def test_first_call_of_each_op_recorded_once():
    # A fresh interpreter: the first call of an op kind runs directly (CPU's
    # kernel through the dispatcher), which must not record the op again.
    proc = run_python(f"""
        import json, torch, torch_infini
        from torch.autograd import DeviceType
        from torch.profiler import profile, ProfilerActivity
        lin = torch.nn.Linear(32, 16).to("infini")
        x = torch.randn(64, 32, device="infini")
        torch.infini.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            torch.relu(lin(x)).sum().item()
            torch.infini.synchronize()
        rows = {{r.key: r for r in prof.key_averages()}}
        print(json.dumps({{
            "counts": {{k: rows[k].count for k in {OPS!r} if k in rows}},
            "device_us": {{k: rows[k].device_time_total for k in {OPS!r} if k in rows}},
        }}))
    """, env=fallback_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["counts"] == {name: 1 for name in OPS}
    if on_host():
        for name in ["aten::addmm", "aten::relu", "aten::sum"]:
            assert out["device_us"][name] > 0, name


@needs_host
def test_device_events_lie_between_launch_and_region_end(warm_model):
    lin, x = warm_model
    prof, _ = profiled_step(lin, x)
    events = prof.events()
    ops = {e.id: e for e in events if e.device_type == DeviceType.CPU}
    region_end = next(e for e in events if e.name == "end_of_region").time_range.end
    kernels = device_events(prof)
    names = {k.name for k in kernels}
    for op in ["aten::addmm", "aten::relu", "aten::sum"]:
        assert any(op in n for n in names), (op, names)
    assert any(n.startswith("Memcpy DtoH") for n in names), names  # item()
    for k in kernels:
        assert k.time_range.elapsed_us() > 0, k.name
        launcher = ops[k.linked_correlation_id]
        assert launcher.time_range.start - CLOCK_SLACK_US <= k.time_range.start, k.name
        assert k.time_range.end <= region_end + CLOCK_SLACK_US, k.name


@needs_host
def test_key_averages_has_device_time_per_op(warm_model):
    lin, x = warm_model
    prof, _ = profiled_step(lin, x)
    rows = {row.key: row for row in prof.key_averages()}
    for op in ["aten::addmm", "aten::relu", "aten::sum"]:
        assert rows[op].device_time_total > 0, op
        assert rows[op].self_device_time_total > 0, op
    # The op's device time is its kernels' (the linear's is its addmm's).
    assert rows["aten::linear"].device_time_total == pytest.approx(
        rows["aten::addmm"].device_time_total)
    table = prof.key_averages().table(sort_by="device_time_total", row_limit=20)
    assert "aten::addmm" in table


@needs_host
def test_chrome_trace_has_a_lane_per_stream(warm_model, tmp_path):
    lin, x = warm_model
    side = torch.infini.Stream()
    with profile(activities=ACTIVITIES) as prof:
        y = lin(x)
        side.wait_stream(torch.infini.current_stream())
        with torch.infini.stream(side):
            z = torch.relu(y)
        torch.infini.synchronize()
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())["traceEvents"]
    device_pid = next(e["pid"] for e in trace if e.get("ph") == "M"
                      and e["name"] == "process_name" and e["args"]["name"] == "infini")
    lanes = {e["tid"]: e["args"]["name"] for e in trace if e.get("ph") == "M"
             and e["name"] == "thread_name" and e["pid"] == device_pid}
    kernels = [e for e in trace if e.get("cat") == "kernel" and e["pid"] == device_pid]
    by_name = {e["name"]: e for e in kernels}
    addmm = next(e for n, e in by_name.items() if "aten::addmm" in n)
    relu = next(e for n, e in by_name.items() if "aten::relu" in n)
    assert lanes[addmm["tid"]] == "stream 0"
    assert lanes[relu["tid"]] == f"stream {side.stream_id}"
    assert addmm["dur"] > 0 and relu["dur"] > 0
    # The relu waited for the addmm on the other stream.
    assert relu["ts"] >= addmm["ts"] + addmm["dur"] - CLOCK_SLACK_US
    assert torch.equal(z.cpu(), torch.relu(y.cpu()))


def test_no_device_tracing_without_a_device_profiler(warm_model):
    lin, x = warm_model
    assert torch_infini._C._profiler_device_tracing() is False
    with profile(activities=[ProfilerActivity.CPU]) as cpu_only:
        assert torch_infini._C._profiler_device_tracing() is False
        model_step(lin, x)
    assert device_events(cpu_only) == []
    with profile(activities=ACTIVITIES):
        tracing_inside = torch_infini._C._profiler_device_tracing()
    assert tracing_inside is True
    assert torch_infini._C._profiler_device_tracing() is False
    # Same values with and without the profiler.
    plain = model_step(lin, x)
    _, profiled = profiled_step(lin, x)
    assert plain == profiled


def test_legacy_profiler_use_device_gets_device_time():
    # torch.autograd.profiler.profile(use_device="infini") without Kineto uses
    # the registered PrivateUse1 stubs: a timed event around each operator.
    proc = run_python("""
        import json, torch, torch_infini
        lin = torch.nn.Linear(32, 16).to("infini")
        x = torch.randn(64, 32, device="infini")
        torch.relu(lin(x)).sum().item()
        torch.infini.synchronize()
        with torch.autograd.profiler.profile(use_device="infini") as prof:
            torch.relu(lin(x)).sum().item()
            torch.infini.synchronize()
        rows = {r.key: r for r in prof.key_averages()}
        print(json.dumps({k: [rows[k].count, rows[k].device_time_total]
                          for k in ["aten::addmm", "aten::relu", "aten::sum", "aten::item"]}))
    """, env=fallback_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    # Before the stubs were registered, every operator's start raised inside
    # the profiler's callback ("INTERNAL ASSERT FAILED" warnings).
    assert "INTERNAL ASSERT" not in proc.stderr, proc.stderr[-3000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    for name, (count, device_us) in out.items():
        assert count == 1, name
        assert device_us > 0, name
