"""Every TORCH_INFINI_* variable is validated the same way: unset or empty is
the default, a well-formed value works, and a malformed one is an error at
first use naming the variable, the value and the accepted forms (never a
warning, never a silent default).

Variables are read once per process: each case is a fresh interpreter,
all started together.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import textwrap

import pytest

from torch_infini import _env
from hang_guard import HANG_GUARD_S

FIRST_USE = textwrap.dedent(
    """
    import json, warnings
    import torch, torch_infini
    r = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name, use in [("device_count", lambda: torch.infini.device_count()),
                          ("is_available", lambda: torch.infini.is_available()),
                          ("tensor", lambda: (torch.ones(2, device="infini") + 1).cpu().tolist()),
                          ("fallback", lambda: torch_infini.fallback.is_enabled())]:
            try:
                r[name] = use()
            except Exception as e:
                r[name] = {"error": type(e).__name__, "message": str(e).splitlines()[0]}
    r["warnings"] = [str(w.message) for w in caught]
    print("RESULT" + json.dumps(r))
    """
)

# (variable, malformed value, words of the accepted forms the message must give)
MALFORMED = [
    ("TORCH_INFINI_PROVIDER", "bogus", ["auto", "host", "infini"]),
    ("TORCH_INFINI_RT_BACKEND", "gpu", ["cpu", "nvidia"]),
    ("TORCH_INFINI_HOST_DEVICES", "abc", ["integer from 1 to 16"]),
    ("TORCH_INFINI_HOST_DEVICES", "99", ["integer from 1 to 16"]),
    ("TORCH_INFINI_HOST_DEVICES", " 2", ["integer from 1 to 16"]),
    ("TORCH_INFINI_HOST_MEMORY", "12Q", ["byte count", "K, M or G"]),
    ("TORCH_INFINI_HOST_MEMORY", "0", ["positive byte count"]),
    ("TORCH_INFINI_ALLOC_CONF", "caching:maybe", ["caching", "1", "0"]),
    ("TORCH_INFINI_ALLOC_CONF", "expandable_segments:1", ["caching"]),
    ("TORCH_INFINI_CPU_FALLBACK", "yes", ["1 (on) or 0 (off)"]),
    ("TORCH_INFINI_CPU_FALLBACK", "banana", ["1 (on) or 0 (off)"]),
    ("TORCH_INFINI_WORKER_THREADS", "0", ["integer from 1 to 4096"]),
    ("TORCH_INFINI_AUTOGRAD_DEVICE_THREADS", "yes", ["1 (on) or 0 (off)"]),
]

FIRST_USES = {"TORCH_INFINI_ALLOC_CONF": ("tensor",), "TORCH_INFINI_CPU_FALLBACK": ("fallback",),
              "TORCH_INFINI_WORKER_THREADS": ("tensor",)}

# (environment, what the script then sees)
WELL_FORMED = {
    "empty_is_default": ({"TORCH_INFINI_HOST_DEVICES": "", "TORCH_INFINI_CPU_FALLBACK": ""},
                         {"device_count": 1, "fallback": False}),
    "two_devices": ({"TORCH_INFINI_HOST_DEVICES": "2"}, {"device_count": 2, "fallback": False}),
    "small_memory": ({"TORCH_INFINI_HOST_MEMORY": "64M"}, {"device_count": 1, "fallback": False}),
    "fallback_on": ({"TORCH_INFINI_CPU_FALLBACK": "1"}, {"device_count": 1, "fallback": True}),
    "caching_off": ({"TORCH_INFINI_ALLOC_CONF": "caching:0"}, {"device_count": 1, "fallback": False}),
    "one_worker_thread": ({"TORCH_INFINI_WORKER_THREADS": "1"}, {"device_count": 1, "fallback": False}),
    "autograd_device_threads": ({"TORCH_INFINI_AUTOGRAD_DEVICE_THREADS": "1"}, {"device_count": 1, "fallback": False}),
}


def _case_id(case) -> str:
    return f"{case[0]}={case[1]!r}"


def _environment(changes: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(_env.PREFIX)}
    env["TORCH_INFINI_PROVIDER"] = "host"  # the host runtime reads every variable above
    env.update(changes)
    return env


def _run(name: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", FIRST_USE], env=_environment(env), capture_output=True,
                          text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, f"{name}: {proc.stderr[-2000:]}"
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, f"{name}: {proc.stdout}{proc.stderr}"
    return json.loads(line[-1][len("RESULT"):])


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    """Every case of this file, four at a time (each imports torch)."""
    jobs = {_case_id(c): {c[0]: c[1]} for c in MALFORMED}
    jobs.update({name: env for name, (env, _) in WELL_FORMED.items()})
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        futures = {name: pool.submit(_run, name, env) for name, env in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.mark.parametrize("case", MALFORMED, ids=_case_id)
def test_malformed_value_is_an_error_naming_variable_value_and_forms(results, case):
    variable, value, accepted = case
    r = results[_case_id(case)]
    # Each fails its first use: the runtime's variables the first device query,
    # the allocator's the first allocation, the fallback switch the first
    # fallback query. Either way an error, never a default.
    uses = FIRST_USES.get(variable, ("device_count", "is_available", "tensor"))
    for use in uses:
        outcome = r[use]
        assert isinstance(outcome, dict), f"{use} returned {outcome!r} with {variable}={value!r}"
        assert outcome["error"] == "RuntimeError"
        message = outcome["message"]
        assert f"{variable}='{value}'" in message, message
        for word in accepted:
            assert word in message, (word, message)


def test_malformed_runtime_variable_is_not_only_a_warning(results):
    r = results[_case_id(("TORCH_INFINI_HOST_DEVICES", "abc", []))]
    assert isinstance(r["device_count"], dict)  # an error, not 0 devices


@pytest.mark.parametrize("name", sorted(WELL_FORMED))
def test_well_formed_values_are_accepted(results, name):
    _, expected = WELL_FORMED[name]
    r = results[name]
    assert r["device_count"] == expected["device_count"], r
    assert r["is_available"] is True
    assert r["tensor"] == [2.0, 2.0]
    assert r["fallback"] is expected["fallback"]
    assert not [w for w in r["warnings"] if "TORCH_INFINI" in w], r["warnings"]


@pytest.mark.parametrize("value,expected", [("", False), ("0", False), ("1", True)])
def test_python_side_switch_accepts_0_and_1(value, expected):
    assert _env.switch("TORCH_INFINI_OP_REPORT", environ={"TORCH_INFINI_OP_REPORT": value}) is expected


@pytest.mark.parametrize("value", ["yes", "true", "on", " 1", "2"])
def test_python_side_switch_refuses_everything_else(value):
    with pytest.raises(RuntimeError) as caught:
        _env.switch("TORCH_INFINI_OP_REPORT", environ={"TORCH_INFINI_OP_REPORT": value})
    assert str(caught.value) == f"TORCH_INFINI_OP_REPORT='{value}' is invalid: expected 1 (on) or 0 (off)"


def test_unknown_variables_are_listed():
    env = {"TORCH_INFINI_HOST_DEVICE": "2", "TORCH_INFINI_PROVIDER": "host", "TORCH_INFINI_DEBUG": "1", "PATH": "/"}
    assert _env.unknown_variables(env) == ["TORCH_INFINI_HOST_DEVICE"]
