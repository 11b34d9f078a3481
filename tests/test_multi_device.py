"""Several host-runtime devices (TORCH_INFINI_HOST_DEVICES, read once per
process, so each setting runs in a fresh interpreter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from hang_guard import HANG_GUARD_S


def run_python(code: str, env: dict[str, str] | None = None, timeout: float = HANG_GUARD_S) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter. (Not ``from conftest import
    run_python``: with tests/conformance/conftest.py also on sys.path, the name
    ``conftest`` may resolve to that one.)"""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=dict(os.environ, **(env or {})),
                          capture_output=True, text=True, timeout=timeout)


VAR = "TORCH_INFINI_HOST_DEVICES"

# Runs with two devices; prints one JSON object of what it observed.
TWO_DEVICE_SCRIPT = r"""
import json, threading
import torch, torch_infini

r = {}
r["device_count"] = torch.infini.device_count()
r["accelerator_count"] = torch.accelerator.device_count()
r["names"] = [torch.infini.get_device_name(i) for i in range(torch.infini.device_count())]

src = torch.arange(24, dtype=torch.float32).reshape(4, 6) * 0.5 - 3
r["src"] = src.tolist()

a0 = src.to("infini:0")
a1 = src.to("infini:1")
r["alloc_devices"] = [str(torch.empty(3, device="infini:0").device),
                      str(torch.empty(3, device="infini:1").device),
                      str(a0.device), str(a1.device)]
r["alloc_values"] = [a0.cpu().tolist(), a1.cpu().tolist()]
r["current_after_alloc"] = torch.infini.current_device()

# infini:0 -> infini:1 -> infini:0, contiguous and strided.
b1 = a0.to("infini:1")
b0 = b1.to("infini:0")
r["cross_devices"] = [str(b1.device), str(b0.device)]
r["cross_values"] = [b1.cpu().tolist(), b0.cpu().tolist()]
dst1 = torch.empty(6, 4, device="infini:1")
dst1.copy_(a0.t())
r["cross_strided"] = dst1.cpu().tolist()
dst0 = torch.empty(4, 6, device="infini:0").t()
dst0.copy_(a1.t())
r["cross_strided_dst"] = dst0.cpu().tolist()

# Add runs on the operands' device, whatever the current device is.
s1 = a1 + a1
r["add_on_1"] = [str(s1.device), s1.cpu().tolist()]
try:
    a0 + a1
    r["mixed_add"] = None
except RuntimeError as e:
    r["mixed_add"] = str(e)

# The device context changes where device="infini" allocates.
with torch.infini.device(1):
    r["ctx_current"] = torch.infini.current_device()
    r["ctx_alloc"] = str(torch.empty(2, device="infini").device)
    r["ctx_to"] = str(torch.ones(2).to("infini").device)
r["after_ctx_current"] = torch.infini.current_device()
r["after_ctx_alloc"] = str(torch.empty(2, device="infini").device)
with torch.infini.device_of(a1):
    r["device_of"] = torch.infini.current_device()
try:
    with torch.infini.device(1):
        raise KeyError("boom")
except KeyError:
    pass
r["after_exc_current"] = torch.infini.current_device()

# Per-device current streams.
d0, d1 = torch.infini.default_stream(0), torch.infini.default_stream(1)
r["default_devices"] = [d0.device_index, d1.device_index]
r["current_is_default"] = [torch.infini.current_stream(0) == d0, torch.infini.current_stream(1) == d1]
s = torch.infini.Stream(device=1)
r["stream_device"] = s.device_index
with torch.infini.stream(s):
    r["in_stream_cur1"] = torch.infini.current_stream(1) == s
    r["in_stream_cur0_default"] = torch.infini.current_stream(0) == d0
    r["in_stream_current_device"] = torch.infini.current_device()
    t = a1 + 1
    r["in_stream_add"] = t.cpu().tolist()
r["after_stream_cur1_default"] = torch.infini.current_stream(1) == d1
r["after_stream_current_device"] = torch.infini.current_device()
s0 = torch.infini.Stream(device=0)
torch.infini.set_stream(s0)
torch.infini.set_stream(s)
r["both_set"] = [torch.infini.current_stream(0) == s0, torch.infini.current_stream(1) == s]
torch.infini.set_stream(d1)
r["reset_1_keeps_0"] = [torch.infini.current_stream(0) == s0, torch.infini.current_stream(1) == d1]
torch.infini.set_stream(d0)

# set_device is per thread: a new thread starts on device 0.
torch.infini.set_device(1)
seen = []
th = threading.Thread(target=lambda: seen.append(torch.infini.current_device()))
th.start(); th.join()
r["thread_device"] = seen[0]
r["main_device"] = torch.infini.current_device()
torch.infini.set_device(0)

for i in range(2):
    torch.infini.synchronize(i)
print("RESULT" + json.dumps(r))
"""


@pytest.fixture(scope="module")
def two_devices() -> dict:
    proc = run_python(TWO_DEVICE_SCRIPT, env={VAR: "2", "TORCH_INFINI_PROVIDER": "host"})
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][len("RESULT"):])


def _cpu_src(r: dict) -> torch.Tensor:
    return torch.tensor(r["src"], dtype=torch.float32)


def test_device_count_is_two(two_devices):
    assert two_devices["device_count"] == 2
    assert two_devices["accelerator_count"] == 2
    assert len(set(two_devices["names"])) == 2


def test_allocation_lands_on_requested_device(two_devices):
    assert two_devices["alloc_devices"] == ["infini:0", "infini:1", "infini:0", "infini:1"]
    src = _cpu_src(two_devices)
    for values in two_devices["alloc_values"]:
        torch.testing.assert_close(torch.tensor(values), src, rtol=0, atol=0)
    # Allocating on another device does not change the current device.
    assert two_devices["current_after_alloc"] == 0


def test_copy_between_devices_matches_cpu(two_devices):
    src = _cpu_src(two_devices)
    assert two_devices["cross_devices"] == ["infini:1", "infini:0"]
    for values in two_devices["cross_values"]:
        torch.testing.assert_close(torch.tensor(values), src, rtol=0, atol=0)
    torch.testing.assert_close(torch.tensor(two_devices["cross_strided"]), src.t(), rtol=0, atol=0)
    torch.testing.assert_close(torch.tensor(two_devices["cross_strided_dst"]), src.t(), rtol=0, atol=0)


def test_add_runs_on_operand_device(two_devices):
    src = _cpu_src(two_devices)
    device, values = two_devices["add_on_1"]
    assert device == "infini:1"
    torch.testing.assert_close(torch.tensor(values), src + src, rtol=0, atol=0)
    message = two_devices["mixed_add"]
    assert message is not None and "infini:0" in message and "infini:1" in message


def test_device_context_changes_default_allocation(two_devices):
    assert two_devices["ctx_current"] == 1
    assert two_devices["ctx_alloc"] == "infini:1"
    assert two_devices["ctx_to"] == "infini:1"
    assert two_devices["after_ctx_current"] == 0
    assert two_devices["after_ctx_alloc"] == "infini:0"
    assert two_devices["device_of"] == 1
    assert two_devices["after_exc_current"] == 0


def test_current_streams_are_per_device(two_devices):
    r = two_devices
    assert r["default_devices"] == [0, 1]
    assert r["current_is_default"] == [True, True]
    assert r["stream_device"] == 1
    assert r["in_stream_cur1"] is True
    assert r["in_stream_cur0_default"] is True
    # As torch.cuda.stream(): selecting a stream selects its device too.
    assert r["in_stream_current_device"] == 1
    torch.testing.assert_close(torch.tensor(r["in_stream_add"]), _cpu_src(r) + 1, rtol=0, atol=0)
    assert r["after_stream_cur1_default"] is True
    assert r["after_stream_current_device"] == 0
    assert r["both_set"] == [True, True]
    assert r["reset_1_keeps_0"] == [True, True]


def test_current_device_is_per_thread(two_devices):
    assert two_devices["main_device"] == 1
    assert two_devices["thread_device"] == 0


# --- invalid TORCH_INFINI_HOST_DEVICES ---------------------------------------

BAD_ENV_SCRIPT = r"""
import json, warnings
import torch, torch_infini

r = {}
for name, fn in [("is_available", lambda: torch.infini.is_available()),
                 ("device_count", lambda: torch.infini.device_count()),
                 ("empty", lambda: torch.empty(1, device="infini")),
                 ("to", lambda: torch.ones(1).to("infini"))]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r[name] = repr(fn())
    except Exception as e:
        r[name] = [type(e).__name__, str(e).split("\n")[0]]
d = torch_infini.diagnostics()
r["diagnostics"] = [d["usable"], d["device_count"], [p["problem"] for p in d["problems"]]]
print("RESULT" + json.dumps(r))
"""


@pytest.fixture(scope="module", params=["abc", "0", "17"])
def bad_env(request) -> tuple[str, dict, str]:
    value = request.param
    proc = run_python(BAD_ENV_SCRIPT, env={VAR: value, "TORCH_INFINI_PROVIDER": "host"})
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    return value, json.loads(line[-1][len("RESULT"):]), proc.stderr


def test_bad_host_devices_is_an_error_not_zero_devices(bad_env):
    """Not a warning and 0 devices: an error naming the variable, the value
    and the accepted forms, from every first use."""
    value, r, _stderr = bad_env
    for use in ("is_available", "device_count", "empty", "to"):
        assert isinstance(r[use], list), f"{use} returned {r[use]} with {VAR}={value!r}"
        kind, message = r[use]
        assert kind == "RuntimeError"
        assert f"{VAR}='{value}' is invalid: expected an integer from 1 to 16" in message, message


def test_bad_host_devices_diagnostics_names_variable(bad_env):
    value, r, _ = bad_env
    usable, count, problems = r["diagnostics"]
    assert usable is False and count == 0
    assert len(problems) == 1
    assert VAR in problems[0] and value in problems[0]
