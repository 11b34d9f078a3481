"""torch.infini device management, with torch.cuda's semantics."""

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


def test_is_available_and_device_count():
    assert torch.infini.is_available() is True
    count = torch.infini.device_count()
    assert isinstance(count, int)
    assert count >= 1
    assert torch.accelerator.device_count() == count


INIT_SCRIPT = """
import json
import torch, torch_infini
r = {"import": torch.infini.is_initialized()}
torch.infini.is_available()
torch.infini.device_count()
r["after_count"] = torch.infini.is_initialized()
torch.empty(1, device="infini")
r["after_alloc"] = torch.infini.is_initialized()
print("RESULT" + json.dumps(r))
"""


@pytest.fixture(scope="module")
def init_states() -> dict:
    proc = run_python(INIT_SCRIPT)
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][len("RESULT"):])


def test_not_initialized_at_import(init_states):
    assert init_states["import"] is False


def test_initialized_after_first_allocation(init_states):
    assert init_states["after_alloc"] is True


def test_is_available_and_device_count_do_not_initialize(init_states):
    assert init_states["after_count"] is False


def test_is_initialized_after_use():
    torch.empty(1, device="infini")
    assert torch.infini.is_initialized() is True


def test_current_device_defaults_to_zero():
    assert torch.infini.current_device() == 0
    assert torch.empty(1, device="infini").device == torch.device("infini:0")


@pytest.mark.parametrize("spec", [0, "infini:0", torch.device("infini:0"), torch.device("infini", 0)])
def test_set_device_accepts_int_str_and_device(spec):
    torch.infini.set_device(spec)
    assert torch.infini.current_device() == 0


def test_set_device_bad_index_raises_naming_it():
    before = torch.infini.current_device()
    with pytest.raises(RuntimeError, match=r"\b5\b"):
        torch.infini.set_device(5)
    assert torch.infini.current_device() == before


def test_set_device_negative_is_noop():
    before = torch.infini.current_device()
    torch.infini.set_device(-1)
    assert torch.infini.current_device() == before


def test_set_device_rejects_other_device_type():
    with pytest.raises(ValueError):
        torch.infini.set_device(torch.device("cpu"))


def test_device_context_sets_and_restores():
    before = torch.infini.current_device()
    with torch.infini.device(0):
        assert torch.infini.current_device() == 0
    assert torch.infini.current_device() == before


def test_device_context_none_and_negative_are_noops():
    before = torch.infini.current_device()
    with torch.infini.device(None):
        assert torch.infini.current_device() == before
    with torch.infini.device(-1):
        assert torch.infini.current_device() == before
    assert torch.infini.current_device() == before


def test_device_context_restores_on_exception():
    before = torch.infini.current_device()

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with torch.infini.device("infini:0"):
            raise Boom()
    assert torch.infini.current_device() == before


def test_device_context_bad_index_raises():
    with pytest.raises(RuntimeError, match=r"\b9\b"):
        with torch.infini.device(9):
            pass
    assert torch.infini.current_device() == 0


def test_device_of_infini_tensor():
    t = torch.empty(2, device="infini:0")
    with torch.infini.device_of(t):
        assert torch.infini.current_device() == t.get_device()
    assert torch.infini.current_device() == 0


def test_device_of_cpu_tensor_is_noop():
    before = torch.infini.current_device()
    ctx = torch.infini.device_of(torch.empty(2))
    assert ctx.idx == -1
    with ctx:
        assert torch.infini.current_device() == before


@pytest.mark.parametrize("spec", [None, 0, "infini:0", "infini", torch.device("infini:0")])
def test_synchronize_accepts_all_device_forms(spec):
    src = torch.arange(1000, dtype=torch.float32)
    t = src.to("infini")
    out = t + t
    torch.infini.synchronize(spec)
    torch.testing.assert_close(out.cpu(), src + src, rtol=0, atol=0)


def test_synchronize_bad_index_raises():
    with pytest.raises(RuntimeError, match=r"\b5\b"):
        torch.infini.synchronize(5)


def test_get_device_name():
    name = torch.infini.get_device_name()
    assert isinstance(name, str) and name
    assert torch.infini.get_device_name(0) == name
    assert torch.infini.get_device_name("infini:0") == name
    assert torch.infini.get_device_name(torch.device("infini:0")) == name


def test_get_device_properties():
    props = torch.infini.get_device_properties(0)
    assert props.name == torch.infini.get_device_name(0)
    assert isinstance(props.total_memory, int)
    assert props.total_memory > 0
    assert torch.infini.get_device_properties() == props
    free, total = torch.infini.mem_get_info(0)
    assert total == props.total_memory
    assert 0 <= free <= total


@pytest.mark.parametrize("bad", [5, -1])
def test_get_device_properties_invalid_id(bad):
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.infini.get_device_properties(bad)


def test_get_device_name_invalid_id():
    with pytest.raises(AssertionError, match="Invalid device id"):
        torch.infini.get_device_name(5)


def test_allocation_on_missing_device_raises():
    with pytest.raises(RuntimeError, match=r"\b7\b"):
        torch.empty(1, device="infini:7")
    # The failed allocation left the current device alone.
    assert torch.infini.current_device() == 0



def test_forked_child_refuses_the_device_instead_of_hanging():
    """As torch.cuda: a child forked after the runtime started must not use
    it (its stream workers do not exist there); it raises, naming 'spawn'."""
    code = r"""
import os, sys, torch, torch_infini
x = torch.ones(4).to("infini")
assert not torch.infini._is_in_bad_fork()
pid = os.fork()
if pid == 0:
    try:
        assert torch.infini._is_in_bad_fork()
        torch.ones(2).to("infini")
    except RuntimeError as e:
        os._exit(0 if "spawn" in str(e) else 3)
    os._exit(2)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
print("parent ok", torch.equal((x + x).cpu(), torch.full((4,), 2.0)))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert "child 0" in proc.stdout
    assert "parent ok True" in proc.stdout


def test_forked_child_init_raises_and_is_not_initialized():
    """torch.cuda's contract in a child forked after the parent used the
    device: is_initialized() is False and init() raises, naming 'spawn'."""
    code = r"""
import os, torch, torch_infini
torch.ones(4).to("infini")
assert torch.infini.is_initialized()
pid = os.fork()
if pid == 0:
    if torch.infini.is_initialized():
        os._exit(4)
    try:
        torch.infini.init()
    except RuntimeError as e:
        os._exit(0 if "spawn" in str(e) else 3)
    os._exit(2)
_, status = os.waitpid(pid, 0)
print("child", os.waitstatus_to_exitcode(status))
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr
    assert "child 0" in proc.stdout, proc.stdout


def test_accelerator_device_capability():
    """torch.accelerator.get_device_capability answers for infini: every dtype
    infini tensors can hold, and not the quantized ones (refused)."""
    for device in ("infini:0", torch.device("infini", 0), 0, None):
        dtypes = torch.accelerator.get_device_capability(device)["supported_dtypes"]
        assert {torch.float32, torch.bfloat16, torch.float16, torch.int64, torch.bool,
                torch.complex64, torch.uint16, torch.float8_e4m3fn} <= dtypes
        assert not dtypes & {torch.qint8, torch.quint8, torch.qint32}
    with pytest.raises(RuntimeError):
        torch.accelerator.get_device_capability(torch.infini.device_count())
