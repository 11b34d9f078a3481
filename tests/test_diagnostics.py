"""torch_infini.diagnostics(), operator_table(), ``python -m torch_infini`` and
TORCH_INFINI_PROVIDER."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch

import torch_infini
from torch_infini import backend_support
from hang_guard import HANG_GUARD_S

CAPABILITIES = {"async_copy", "pinned_memory", "timed_events", "async_execution", "blocking_events", "graphs",
                "host_addressable", "protected_memory", "host_funcs", "host_kernels"}
STACK_COMPILED = bool(torch_infini.build_info()["infini_stack"])


PROVIDER_SCRIPT = """
import json, warnings
warnings.simplefilter("ignore")
import torch, torch_infini
r = {}
d = torch_infini.diagnostics()  # never raises
r["provider"], r["reason"] = d["provider"], d["selection_reason"]
r["usable"], r["problems"] = d["usable"], d["problems"]
try:
    x = torch.arange(4.0).to("infini")
    r["add"] = (x + x).cpu().tolist()
except Exception as e:
    r["use_error"] = [type(e).__name__, str(e).splitlines()[0]]
print("RESULT" + json.dumps(r))
"""

# Every subprocess of this file: name -> (argv after the interpreter, extra environment).
SUBPROCESSES = {
    "main": (["-m", "torch_infini"], {}),
    "json": (["-m", "torch_infini", "--json"], {}),
    "ops": (["-m", "torch_infini", "--ops"], {}),
    "ops_json": (["-m", "torch_infini", "--ops", "--json"], {}),
    "backend_nvidia": (["-m", "torch_infini", "--backend", "nvidia"], {}),
    "provider_host": (["-c", PROVIDER_SCRIPT], {"TORCH_INFINI_PROVIDER": "host"}),
    "provider_bogus": (["-c", PROVIDER_SCRIPT], {"TORCH_INFINI_PROVIDER": "bogus"}),
}
if not STACK_COMPILED:
    SUBPROCESSES["provider_infini"] = (["-c", PROVIDER_SCRIPT], {"TORCH_INFINI_PROVIDER": "infini"})


@pytest.fixture(scope="module")
def procs() -> dict[str, subprocess.CompletedProcess]:
    """Runs the subprocesses of this file side by side (each imports torch)."""
    running = {}
    for name, (args, env) in SUBPROCESSES.items():
        full_env = dict(os.environ)
        full_env.pop("TORCH_INFINI_PROVIDER", None)
        full_env.update(env)
        running[name] = subprocess.Popen([sys.executable, *args], env=full_env, stdout=subprocess.PIPE,
                                         stderr=subprocess.PIPE, text=True)
    done = {}
    for name, proc in running.items():
        out, err = proc.communicate(timeout=HANG_GUARD_S)
        done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    return done


def provider_result(procs, name: str) -> dict:
    proc = procs[name]
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][len("RESULT"):])


@pytest.fixture(scope="module")
def diag() -> dict:
    return torch_infini.diagnostics()


def test_diagnostics_versions(diag):
    assert diag["torch_infini"] == torch_infini.__version__
    assert diag["torch"] == torch.__version__
    assert diag["torch_cxx11_abi"] == torch._C._GLIBCXX_USE_CXX11_ABI
    build = torch_infini.build_info()
    assert diag["built_for_torch"] == build["torch_version"]
    assert diag["infini_stack_compiled"] == build["infini_stack"]
    assert diag["infini_rt_backends_compiled"] == build.get("infini_rt_backends", [])
    assert diag["infini_ops_operators_compiled"] == build.get("infini_ops_operators", [])


def test_diagnostics_devices_agree_with_torch_infini(diag):
    assert diag["device_count"] == torch.infini.device_count()
    assert [d["index"] for d in diag["devices"]] == list(range(torch.infini.device_count()))
    for d in diag["devices"]:
        props = torch.infini.get_device_properties(d["index"])
        assert d["name"] == props.name == torch.infini.get_device_name(d["index"])
        assert d["total_memory"] == props.total_memory > 0
        assert 0 <= d["free_memory"] <= d["total_memory"]


def test_diagnostics_provider(diag):
    assert diag["provider"] in ("host", "infini")
    assert isinstance(diag["backend"], str) and diag["backend"]
    assert isinstance(diag["selection_reason"], str) and diag["selection_reason"]
    props = torch.infini.get_device_properties(0)
    assert props.provider == diag["provider"]
    assert props.backend == diag["backend"]
    if not diag["infini_stack_compiled"] and not os.environ.get("TORCH_INFINI_PROVIDER"):
        assert diag["provider"] == "host"
        assert "not compiled" in diag["selection_reason"]


def test_selection_reason_names_the_backends_passed_over(diag):
    """The accelerator backends compiled in before the one chosen (the
    nvidia backend of a build run where no GPU is) are named in the reason,
    with what their probe answered; none is named when the first was taken
    (the host runtime names nothing: it has one backend)."""
    accelerators = [b for b in diag["infini_rt_backends_compiled"] if b != "cpu"]
    passed_over = []
    if diag["provider"] == "infini" and not os.environ.get("TORCH_INFINI_RT_BACKEND"):
        chosen = diag["backend"]
        passed_over = accelerators[:accelerators.index(chosen)] if chosen in accelerators else accelerators
    for backend in passed_over:
        assert f"{backend}: no device (GetDeviceCount " in diag["selection_reason"]
    assert ("passed over: " in diag["selection_reason"]) == bool(passed_over)


def test_diagnostics_capabilities_are_bools(diag):
    caps = diag["capabilities"]
    assert set(caps) == CAPABILITIES
    assert all(isinstance(v, bool) for v in caps.values())
    assert isinstance(diag["caching_allocator"], bool)
    if diag["provider"] == "host":
        # The host runtime is asynchronous and times events by design.
        assert caps["async_execution"] and caps["async_copy"] and caps["timed_events"]


def _pinned_memory_works() -> bool:
    try:
        t = torch.empty(4, pin_memory=True)
    except (RuntimeError, NotImplementedError):
        return False
    return t.is_pinned()


def test_pinned_memory_capability_matches_behaviour(diag):
    """pin_memory() works on every provider (blocks come from the runtime's
    MallocHost); the capability says whether such memory makes copies
    asynchronous, which needs async_copy too."""
    assert _pinned_memory_works()
    caps = diag["capabilities"]
    if diag["provider"] == "host":
        assert caps["pinned_memory"] and caps["async_copy"]
    if not caps["async_copy"]:
        assert not caps["pinned_memory"]


def test_diagnostics_is_json_serializable(diag):
    assert json.loads(json.dumps(diag)) == diag


def test_operator_table_lists_add():
    rows = torch_infini.operator_table()
    assert isinstance(rows, list) and rows
    ops = {row["op"]: row for row in rows}
    assert "aten::add.Tensor" in ops
    add = ops["aten::add.Tensor"]
    assert isinstance(add["dtypes"], list) and add["dtypes"]
    assert all(isinstance(d, str) for d in add["dtypes"])
    for key in ("alpha", "broadcast", "strided"):
        assert isinstance(add[key], bool), key
    assert isinstance(add["kernel"], str) and add["kernel"]


def test_operator_table_dtypes_match_behaviour():
    """Each dtype the table lists for add actually runs; one it omits does not."""
    add = next(r for r in torch_infini.operator_table() if r["op"] == "aten::add.Tensor")
    # The table uses torch's dtype names, as the error messages do.
    names = {dtype: str(dtype).removeprefix("torch.") for dtype in (
        torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.int16,
        torch.int32, torch.int64, torch.uint8, torch.bool)}
    for dtype, name in names.items():
        x = torch.ones(3, dtype=dtype).to("infini")
        if name in add["dtypes"]:
            expected = torch.ones(3, dtype=dtype) + torch.ones(3, dtype=dtype)
            torch.testing.assert_close((x + x).cpu(), expected, rtol=0, atol=0)
        else:
            with pytest.raises(NotImplementedError, match="aten::add.Tensor"):
                x + x


def test_python_m_torch_infini_prints_provider(diag, procs):
    proc = procs["main"]
    assert proc.returncode == 0, proc.stderr
    assert f"Provider: {diag['provider']}" in proc.stdout
    assert diag["selection_reason"] in proc.stdout
    assert torch.__version__ in proc.stdout
    assert f"Devices: {diag['device_count']}" in proc.stdout


def test_python_m_torch_infini_json(diag, procs):
    proc = procs["json"]
    assert proc.returncode == 0, proc.stderr
    printed = json.loads(proc.stdout)
    assert printed["provider"] == diag["provider"]
    assert printed["device_count"] == diag["device_count"]
    assert printed["capabilities"] == diag["capabilities"]
    table = printed["infiniops_backends"]
    assert table["pin"] == backend_support.CURRENT_PIN
    assert [row["backend"] for row in table["backends"]] == list(backend_support.BACKENDS)


def test_python_m_torch_infini_says_per_backend_what_is_native_and_what_needs_its_pytorch(procs):
    """Per InfiniOps backend: the bound overloads native there, those only
    ATen-backed (and the PyTorch that then needs), those absent."""
    text = procs["main"].stdout
    assert f"InfiniOps {backend_support.CURRENT_PIN} per backend" in text
    for backend in backend_support.BACKENDS:
        found = backend_support.bound_by_status(backend)
        row = next(line for line in text.splitlines() if line.split()[:1] == [backend])
        assert row.split()[1:4] == [str(len(found["native"])), str(len(found["aten"])), str(len(found["absent"]))]
    nvidia = next(line for line in text.splitlines() if line.split()[:1] == ["nvidia"])
    assert "'cuda': a CUDA build of PyTorch" in nvidia
    assert "torch_npu" in next(line for line in text.splitlines() if line.split()[:1] == ["ascend"])
    # The status stays the last line.
    assert text.splitlines()[-1].startswith("Status: ")
    listed = procs["backend_nvidia"]
    assert listed.returncode == 0, listed.stderr
    found = backend_support.bound_by_status("nvidia")
    assert f"native on nvidia: {len(found['native'])}" in listed.stdout
    assert "  aten::mm.out" in listed.stdout
    assert f"ATen-backed only (InfiniOps WITH_TORCH=ON; needs a CUDA build of PyTorch (torch.version.cuda)): " \
           f"{len(found['aten'])}" in listed.stdout


def test_python_m_torch_infini_ops(procs):
    proc = procs["ops"]
    assert proc.returncode == 0, proc.stderr
    assert "aten::add.Tensor" in proc.stdout
    add = next(r for r in torch_infini.operator_table() if r["op"] == "aten::add.Tensor")
    assert ", ".join(add["dtypes"]) in proc.stdout


def test_registered_operators_are_every_privateuse1_registration():
    rows = torch_infini.registered_operators()
    names = [row["op"] for row in rows]
    assert names == sorted(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))
    native = {row["op"] for row in rows if row["native"]}
    for op in ("aten::add.Tensor", "aten::_copy_from", "aten::empty_strided", "aten::view", "aten::set_"):
        assert op in native, op
    # torch_infini's own kernels are the aten ones; c10d's are PyTorch's.
    assert all(name.startswith("aten::") for name in native)
    assert all(not row["native"] for row in rows if row["op"].startswith("c10d::"))
    provider = torch_infini.diagnostics()["provider"]
    assert all(provider in row["note"] for row in rows if row["native"])


def test_python_m_torch_infini_ops_lists_registrations(procs):
    proc = procs["ops"]
    assert proc.returncode == 0, proc.stderr
    # What other libraries register depends on what the process imported
    # (this one imported more: e.g. FSDP's fsdp:: ops); torch_infini's own
    # registrations do not.
    native = [row for row in torch_infini.registered_operators() if row["native"]]
    for row in native:
        assert f"{row['op']}  {row['note']}" in proc.stdout
    assert "TORCH_INFINI_CPU_FALLBACK" in proc.stdout
    printed = json.loads(procs["ops_json"].stdout)
    assert printed["kernels"] == torch_infini.operator_table()
    assert [row for row in printed["registered"] if row["native"]] == native


def test_provider_forced_host(procs):
    r = provider_result(procs, "provider_host")
    assert r.get("provider") == "host", r
    assert "TORCH_INFINI_PROVIDER" in r["reason"]
    assert r["add"] == [0.0, 2.0, 4.0, 6.0]


def test_provider_bogus_is_a_problem_naming_the_variable(procs):
    r = provider_result(procs, "provider_bogus")
    assert r["usable"] is False and r["provider"] is None
    (problem,) = r["problems"]
    assert problem["problem"].startswith("RuntimeError: ")
    assert "TORCH_INFINI_PROVIDER='bogus'" in problem["problem"]
    assert "TORCH_INFINI_PROVIDER" in problem["fix"]
    kind, message = r["use_error"]
    assert kind == "RuntimeError" and "TORCH_INFINI_PROVIDER='bogus'" in message
    assert "add" not in r


@pytest.mark.skipif(STACK_COMPILED, reason="the Infini stack is compiled in")
def test_provider_infini_without_stack_is_a_problem(procs):
    r = provider_result(procs, "provider_infini")
    assert r["usable"] is False
    (problem,) = r["problems"]
    assert "TORCH_INFINI_PROVIDER=infini" in problem["problem"] and "no Infini stack" in problem["problem"]
    assert "INFINI_RT_PREFIX" in problem["fix"] and "unset TORCH_INFINI_PROVIDER" in problem["fix"]
    assert "use_error" in r and "add" not in r


def test_ops_piped_into_a_reader_that_stops_exits_quietly():
    """``python -m torch_infini --ops | head``: the reader closes the pipe
    early; the command exits 0 without a BrokenPipeError traceback."""
    proc = subprocess.Popen([sys.executable, "-m", "torch_infini", "--ops"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.readline()
    proc.stdout.close()  # as head does after its lines
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=HANG_GUARD_S) == 0, err
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
