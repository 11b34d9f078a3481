"""An ATen-backed InfiniOps on an accelerator needs that device's PyTorch in
the process (torch_infini/_aten_backed.py): the decision against stub build
metadata and stub PyTorch builds, and the provider selection's refusal."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import torch_infini
from torch_infini import _C, backend_support
from torch_infini._aten_backed import ProcessTorch, needed_pytorch, refusal, refusals, torch_device
from torch_infini.diagnostics import fix_for
from hang_guard import HANG_GUARD_S

CPU_TORCH = ProcessTorch(version="2.13.0+cpu", cuda=None, hip=None, privateuse1="infini")
CUDA_TORCH = ProcessTorch(version="2.11.0+cu130", cuda="13.0", hip=None, privateuse1="infini")
ROCM_TORCH = ProcessTorch(version="2.11.0+rocm6.4", cuda=None, hip="6.4", privateuse1="infini")


def _metadata(backends, aten_backed):
    """Build metadata as tools/build_config.build_metadata writes it, for a
    stack with these InfiniRT backends and ATen-backed implementations."""
    return {"infini_stack": True, "infini_rt_backends": list(backends), "infini_ops_aten_backed": list(aten_backed)}


def test_the_device_each_backend_runs_aten_on_is_infiniops_own():
    """InfiniOps' TorchDeviceName, recorded in the support matrix of each pin."""
    expected = {"cpu": "cpu", "nvidia": "cuda", "metax": "cuda", "iluvatar": "cuda", "hygon": "cuda",
                "cambricon": "mlu", "ascend": "npu", "moore": "musa"}
    for pin in backend_support.pins():
        assert {b: backend_support.torch_device(b, pin) for b in backend_support.BACKENDS} == expected
    assert {b: torch_device(b) for b in backend_support.BACKENDS} == expected


def test_nvidia_aten_backed_without_a_cuda_pytorch_is_refused():
    meta = _metadata(["cpu", "nvidia"], ["cpu", "nvidia"])
    why = refusal("nvidia", meta, CPU_TORCH)
    assert why is not None
    for part in ("InfiniRT backend 'nvidia' is refused", "ATen-backed", "WITH_TORCH=ON", "'cuda' kernels",
                 "PyTorch 2.13.0+cpu has no CUDA (torch.version.cuda is None)", "a CUDA build of PyTorch",
                 "WITH_TORCH=OFF", "TORCH_INFINI_RT_BACKEND=cpu", "TORCH_INFINI_PROVIDER=host"):
        assert part in why, (part, why)
    # The CPU backend runs PyTorch's CPU kernels, which every PyTorch has.
    assert refusal("cpu", meta, CPU_TORCH) is None
    assert refusals(meta, CPU_TORCH) == {"nvidia": why}


def test_a_cuda_pytorch_or_a_native_only_infiniops_runs_on_nvidia():
    assert refusal("nvidia", _metadata(["nvidia"], ["nvidia"]), CUDA_TORCH) is None
    # WITH_TORCH=OFF: no index-8 implementation, nothing of PyTorch's needed.
    assert refusal("nvidia", _metadata(["cpu", "nvidia"], []), CPU_TORCH) is None
    # A build from before the metadata recorded it says nothing either way.
    assert refusal("nvidia", {"infini_stack": True, "infini_rt_backends": ["nvidia"]}, CPU_TORCH) is None
    # A ROCm build's 'cuda' is not NVIDIA's.
    assert "torch.version.cuda is None" in refusal("nvidia", _metadata(["nvidia"], ["nvidia"]), ROCM_TORCH)


def test_other_cuda_family_backends_take_their_vendors_cuda_device():
    for backend in ("metax", "iluvatar", "hygon"):
        meta = _metadata([backend], [backend])
        assert refusal(backend, meta, CUDA_TORCH) is None
        why = refusal(backend, meta, CPU_TORCH)
        assert f"{backend}'s build of PyTorch for its 'cuda' device" in why
    assert refusal("hygon", _metadata(["hygon"], ["hygon"]), ROCM_TORCH) is None


@pytest.mark.parametrize("backend, plugin, device", [("ascend", "torch_npu", "npu"),
                                                     ("cambricon", "torch_mlu", "mlu"),
                                                     ("moore", "torch_musa", "musa")])
def test_privateuse1_plugins_cannot_share_the_process(backend, plugin, device):
    """Their PyTorch is a plugin registering its device as PrivateUse1, which
    torch-infini holds: refused whatever PyTorch runs."""
    meta = _metadata(["cpu", backend], ["cpu", backend])
    for running in (CPU_TORCH, CUDA_TORCH):
        why = refusal(backend, meta, running)
        assert plugin in why and f"'{device}'" in why and "PrivateUse1" in why and "cannot share" in why
        assert "build InfiniOps WITH_TORCH=OFF" in why
    assert plugin in needed_pytorch(backend)
    assert refusal(backend, _metadata([backend], []), CPU_TORCH) is None


def test_this_build_records_where_its_infiniops_is_aten_backed():
    info = torch_infini.build_info()
    assert set(info["infini_ops_aten_backed"]) <= set(info["infini_rt_backends"])
    # What import handed the provider selection is the decision for this
    # process's PyTorch and build.
    expected = refusals(info, ProcessTorch.current()) if info["infini_stack"] else {}
    assert _C._backend_refusals() == expected


# Loads the native module before the package, and refuses the backend the
# provider would select before the package's import selects it (as
# _aten_backed.install does for a real refusal); then uses the device.
_REFUSED = """
import importlib.util, os, sys
import torch
spec = importlib.util.find_spec("torch_infini")
path = next(p for p in os.listdir(spec.submodule_search_locations[0]) if p.startswith("_C.") and p.endswith(".so"))
native = importlib.util.spec_from_file_location("torch_infini._C",
                                                os.path.join(spec.submodule_search_locations[0], path))
module = importlib.util.module_from_spec(native)
sys.modules["torch_infini._C"] = module
native.loader.exec_module(module)
module._refuse_backend(sys.argv[1], "refused for this test")
try:
    import torch_infini
    torch.empty(1, device="infini")
    print("RAN")
except RuntimeError as error:
    print("REFUSED", str(error).splitlines()[0])
"""


def test_the_provider_selection_refuses_a_refused_backend():
    """A process whose selected backend is refused fails at the first device
    use (the package's import asks for the provider) with the refusal; the
    host runtime is never refused."""
    backend = torch_infini.diagnostics()["backend"]
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    proc = subprocess.run([sys.executable, "-c", _REFUSED, backend], capture_output=True, text=True,
                          timeout=HANG_GUARD_S, env=env)
    assert proc.returncode == 0, proc.stderr
    if torch_infini.diagnostics()["provider"] == "host":
        assert proc.stdout.strip() == "RAN"
    else:
        assert proc.stdout.startswith("REFUSED") and "refused for this test" in proc.stdout, proc.stdout


def test_the_diagnostics_say_what_to_do():
    why = refusal("nvidia", _metadata(["nvidia"], ["nvidia"]), CPU_TORCH)
    assert "install the PyTorch the problem names" in fix_for(RuntimeError(why))
    missing = OSError("libinfiniops.so: libc10_cuda.so: cannot open shared object file: No such file or directory")
    fix = fix_for(ImportError(str(missing)), stack_compiled=True)
    assert "libc10_cuda.so" in fix and "CUDA" in fix and "WITH_TORCH=OFF" in fix
