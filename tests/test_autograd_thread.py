"""Which thread runs infini's backward (torch_infini/_autograd.py).

Where kernels run on the host (the host runtime, InfiniRT's CPU backend), the
importing thread runs infini's backward itself, as it runs the CPU's:
PyTorch's per-device autograd thread would open a second OpenMP team and
throttle every parallel region of the process. Elsewhere PyTorch's device
threads are kept; ``TORCH_INFINI_AUTOGRAD_DEVICE_THREADS=1`` keeps them
everywhere. Gradients are CPU's either way.
"""

from __future__ import annotations

import json
import threading

import pytest
import torch

import torch_infini
from conftest import run_python
from infini_testing import DEV, fallback_env, fallback_where_unserved

CALLING_THREAD_RUNS_BACKWARD = not torch_infini._autograd.device_threads_by_default()
INFO = torch_infini._C._provider_info()
# Where kernels compute on host cores: the host runtime, InfiniRT's CPU backend.
KERNELS_ON_HOST = INFO["provider"] == "host" or INFO["backend"] == "cpu"


def _backward_threads(x: torch.Tensor, w: torch.Tensor) -> set[int]:
    """The threads that ran the backward of ``(x @ w).relu().sum()``."""
    seen: set[int] = set()
    y = (x @ w).relu()
    y.register_hook(lambda g: seen.add(threading.get_ident()))
    y.sum().backward()
    return seen


def test_importing_thread_runs_backward_where_kernels_run_on_the_host():
    assert INFO["capabilities"]["host_kernels"] is KERNELS_ON_HOST
    assert CALLING_THREAD_RUNS_BACKWARD is KERNELS_ON_HOST
    assert torch.autograd.is_multithreading_enabled() is not CALLING_THREAD_RUNS_BACKWARD
    torch.manual_seed(0)
    x_cpu = torch.randn(8, 16, requires_grad=True)
    w_cpu = torch.randn(16, 4, requires_grad=True)
    x, w = (t.detach().to(DEV).requires_grad_() for t in (x_cpu, w_cpu))
    with fallback_where_unserved():
        threads = _backward_threads(x, w)
    (x_cpu @ w_cpu).relu().sum().backward()
    assert (threads == {threading.get_ident()}) is CALLING_THREAD_RUNS_BACKWARD, threads
    torch.testing.assert_close(x.grad.cpu(), x_cpu.grad)
    torch.testing.assert_close(w.grad.cpu(), w_cpu.grad)


def test_other_threads_keep_pytorchs_default():
    result: dict = {}

    def body() -> None:
        result["enabled"] = torch.autograd.is_multithreading_enabled()
        x = torch.randn(4, 4, device=DEV, requires_grad=True)
        with fallback_where_unserved():
            result["threads"] = _backward_threads(x, torch.eye(4, device=DEV))
        result["grad"] = x.grad.cpu()
        result["me"] = threading.get_ident()

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    assert result["enabled"] is True
    assert result["me"] not in result["threads"]  # PyTorch's infini device thread ran it
    assert result["grad"].shape == (4, 4)


def test_switch_keeps_pytorchs_device_threads():
    code = """
        import json, threading, torch, torch_infini
        x = torch.ones(3, 3, device="infini", requires_grad=True)
        seen = set()
        y = x * 2
        y.register_hook(lambda g: seen.add(threading.get_ident()))
        y.sum().backward()
        print("RESULT" + json.dumps({"enabled": torch.autograd.is_multithreading_enabled(),
                                     "caller_ran": seen == {threading.get_ident()},
                                     "grad": x.grad.cpu().tolist()}))
    """
    env = dict(fallback_env(), TORCH_INFINI_AUTOGRAD_DEVICE_THREADS="1")
    proc = run_python(code, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.split("RESULT")[-1])
    assert result == {"enabled": True, "caller_ran": False, "grad": [[2.0] * 3] * 3}


# A backward whose kernels open parallel regions (1Mi elements, two intra-op
# threads), then the names of the process's threads: an OpenMP team's threads
# take the name of the thread that opened it, so a team of PyTorch's autograd
# device thread shows as a second thread named pt_autograd_*.
TEAM_PROBE = """
    import json, os, torch, torch_infini
    torch.set_num_threads(2)
    x = torch.randn(1 << 20, device="infini", requires_grad=True)
    ((x * 2).relu().sum()).backward()
    torch.infini.synchronize()
    names = [open(f"/proc/self/task/{t}/comm").read().strip() for t in os.listdir("/proc/self/task")]
    print("RESULT" + json.dumps(sum(n.startswith("pt_autograd") for n in names)))
"""


def _autograd_named_threads(env: dict) -> int:
    proc = run_python(TEAM_PROBE, env=dict(fallback_env(), **env))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.split("RESULT")[-1])


@pytest.mark.skipif(not KERNELS_ON_HOST, reason="kernels run off the host: PyTorch's device threads are kept")
def test_no_openmp_team_beside_the_callers():
    """Where kernels run on host cores, a backward leaves no OpenMP team of
    the autograd device thread (at most the thread itself): a second team
    throttles every team's spinning, and CPU work in the process ran 2.4x
    slower."""
    assert _autograd_named_threads({}) <= 1


@pytest.mark.skipif(not (KERNELS_ON_HOST and INFO["provider"] == "infini"),
                    reason="on the host runtime the device thread queues kernels to a stream worker")
def test_device_threads_open_a_team_of_their_own():
    """The probe above sees the team where the device thread runs the
    kernels (TORCH_INFINI_AUTOGRAD_DEVICE_THREADS=1 on InfiniRT's CPU
    backend)."""
    assert _autograd_named_threads({"TORCH_INFINI_AUTOGRAD_DEVICE_THREADS": "1"}) >= 2
