"""TORCH_INFINI_PROTECT_DEVICE_MEMORY=1 (docs/memory-protection.md): the host
runtime's device memory is unreadable to the process outside the runtime's
kernels and copies, as a discrete accelerator's is. A host read of device
memory stops the process with a message naming the address; without the
mode the same read goes through; the runtime's own work (streams, copies of
every kind, kernels with parallel regions, training) runs as before, with
CPU's results."""

from __future__ import annotations

import re

import pytest
import torch

from conftest import run_python
from infini_testing import on_host

pytestmark = pytest.mark.skipif(not on_host(), reason="the mode protects the host runtime's device memory")

PROTECT = {"TORCH_INFINI_PROTECT_DEVICE_MEMORY": "1"}


def _pku() -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            return " pku " in f.read().replace("\n", " ")
    except OSError:
        return False


needs_pku = pytest.mark.skipif(not _pku(), reason="the mode needs memory protection keys (x86 PKU)")

HOST_READ = """
    import ctypes, torch, torch_infini
    x = torch.tensor([1, 2, 3, 4], dtype=torch.int32, device='infini')
    torch.infini.synchronize()
    print(hex(x.data_ptr()), flush=True)
    print(list(ctypes.string_at(x.data_ptr(), 4)), flush=True)
"""


@needs_pku
def test_a_host_read_of_device_memory_faults_with_the_address():
    result = run_python(HOST_READ, env=PROTECT)
    assert result.returncode == -11, (result.returncode, result.stderr[-2000:])
    address = result.stdout.split()[0]
    found = re.search(r"infini: the host touched infini device memory at (0x[0-9a-f]+)", result.stderr)
    assert found, result.stderr[-2000:]
    assert found.group(1) == address
    assert "outside the runtime's kernels and copies" in result.stderr


def test_the_same_read_goes_through_without_the_mode():
    result = run_python(HOST_READ, env={"TORCH_INFINI_PROTECT_DEVICE_MEMORY": "0"})
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split("\n")[1] == str([1, 0, 0, 0])


@needs_pku
def test_pinned_memory_stays_readable():
    result = run_python("""
        import ctypes, torch, torch_infini
        assert torch_infini._C._provider_info()['capabilities']['protected_memory']
        x = torch.arange(4, dtype=torch.int32, device='infini')
        pinned = torch.empty(4, dtype=torch.int32, pin_memory=True)
        pinned.copy_(x, non_blocking=True)
        torch.infini.synchronize()
        print(list(ctypes.string_at(pinned.data_ptr(), 8)))
    """, env=PROTECT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str([0, 0, 0, 0, 1, 0, 0, 0])


@needs_pku
def test_the_runtimes_own_work_runs_and_equals_cpu():
    result = run_python("""
        import torch, torch_infini
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 10))
        data, target = torch.randn(64, 256), torch.randint(0, 10, (64,))
        dev = torch.nn.Sequential(*[m for m in __import__('copy').deepcopy(model)]).to('infini')
        for net, x, y in ((model, data, target), (dev, data.to('infini'), target.to('infini'))):
            opt = torch.optim.Adam(net.parameters(), lr=1e-3)
            for _ in range(3):
                opt.zero_grad()
                loss = torch.nn.functional.cross_entropy(net(x), y)
                loss.backward()
                opt.step()
        for a, b in zip(model.parameters(), dev.parameters()):
            torch.testing.assert_close(b.cpu(), a)
        side = torch.infini.Stream()
        big = torch.randn(1 << 20)
        with torch.infini.stream(side):
            on_dev = big.pin_memory().to('infini', non_blocking=True)  # pinned, queued
            total = (on_dev * 2).sum()                                  # a kernel with parallel regions
        side.synchronize()
        torch.testing.assert_close(total.cpu(), (big * 2).sum())
        pageable = torch.arange(10.).to('infini').cpu()                 # pageable both ways
        assert pageable.tolist() == list(map(float, range(10)))
        print('OK')
    """, env=PROTECT)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "OK"


#: The parts of the suite that run under the mode in the test command: streams
#: and events, copies (pinned, pageable, non-blocking), the generic kernel and
#: the CPU fallback, serialization, the Python API, distributed.
PROTECTED_FILES = [
    "test_streams.py", "test_events.py", "test_copy.py", "test_pinned.py", "ops/test_repeated_calls.py",
    "ops/test_cache_state.py", "test_cpu_fallback.py", "test_serialization.py", "conformance",
    "distributed/test_collectives.py", "distributed/test_training.py",
]


@needs_pku
def test_parts_of_the_suite_under_the_mode():
    import os
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *[str(tests / f) for f in PROTECTED_FILES]],
        cwd=tests.parent, env=dict(os.environ, **PROTECT), capture_output=True, text=True, timeout=1500)
    tail = result.stdout[-3000:] + result.stderr[-2000:]
    assert result.returncode == 0, tail
    assert re.search(r"\d+ passed", result.stdout) and "infini: the host touched" not in result.stderr, tail
