"""With the switch off (the default), torch_infini changes nothing of PyTorch:
every object the switch would replace is PyTorch's own, and CUDA calls fail
(or answer) exactly as on a CPU-only PyTorch without torch_infini.

Three fresh interpreters: the switch on (only to list what it replaces),
torch_infini loaded by ``import torch`` with the switch off, and PyTorch alone
(``TORCH_DEVICE_BACKEND_AUTOLOAD=0``), the oracle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest
from hang_guard import HANG_GUARD_S

LIST_CHANGES = """
import json, torch, torch_infini.transfer_to_infini as t
print("RESULT" + json.dumps([c.target for c in t.changes()]))
"""

PROBE = textwrap.dedent('''
import importlib, io, json, os, sys, tempfile, warnings
warnings.simplefilter("ignore")
import torch

targets = json.loads(sys.argv[1])


def resolve(label):
    """The object a change's label names, or None (labels such as 'with torch.device(...)')."""
    parts = label.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except Exception:
            continue
        try:
            for part in parts[cut:]:
                obj = vars(obj)[part] if isinstance(obj, type) and part in vars(obj) else getattr(obj, part)
            return obj
        except Exception:
            return None
    return None


def fingerprint(obj):
    code = getattr(obj, "__code__", None) or getattr(getattr(obj, "__func__", None), "__code__", None)
    where = None
    if code is not None:
        where = code.co_filename.replace(os.sep, "/").split("/site-packages/")[-1]
        where = where[where.find("torch_infini"):] if "torch_infini" in where else where
    return [type(obj).__name__, getattr(obj, "__module__", None), getattr(obj, "__qualname__", None), where]


objects = {label: fingerprint(resolve(label)) for label in targets if resolve(label) is not None}


def outcome(call):
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            value = call()
        return ["ok", repr(value), sorted({str(w.message).splitlines()[0] for w in caught})]
    except BaseException as error:
        return ["error", type(error).__name__, str(error).splitlines()[0] if str(error) else ""]


def autocast_linear():
    with torch.autocast("cuda", dtype=torch.bfloat16):
        return torch.nn.functional.linear(torch.ones(2, 2), torch.ones(2, 2)).dtype


def default_device():
    with torch.device("cuda"):
        return torch.ones(1)


def load():
    buffer = io.BytesIO()
    torch.save(torch.ones(2), buffer)
    buffer.seek(0)
    return torch.load(buffer, map_location="cuda")


def nccl():
    import torch.distributed as dist
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("nccl", store=dist.FileStore(os.path.join(tmp, "s"), 1), rank=0, world_size=1)


calls = {
    "torch.zeros(device='cuda')": lambda: torch.zeros(1, device="cuda"),
    "Tensor.to('cuda')": lambda: torch.ones(1).to("cuda"),
    "Tensor.cuda()": lambda: torch.ones(1).cuda(),
    "Module.cuda()": lambda: torch.nn.Linear(1, 1).cuda(),
    "torch.Generator('cuda')": lambda: torch.Generator("cuda"),
    "with torch.device('cuda')": default_device,
    "torch.cuda.is_available()": lambda: torch.cuda.is_available(),
    "torch.cuda.device_count()": lambda: torch.cuda.device_count(),
    "torch.cuda.set_device(0)": lambda: torch.cuda.set_device(0),
    "torch.cuda.current_device()": lambda: torch.cuda.current_device(),
    "torch.cuda.synchronize()": lambda: torch.cuda.synchronize(),
    "torch.cuda.Stream()": lambda: torch.cuda.Stream(),
    "torch.cuda.memory_allocated()": lambda: torch.cuda.memory_allocated(),
    "torch.cuda.manual_seed(0)": lambda: torch.cuda.manual_seed(0),
    "torch.cuda.get_device_capability()": lambda: torch.cuda.get_device_capability(),
    "torch.autocast('cuda')": autocast_linear,
    "torch.amp.GradScaler('cuda')": lambda: torch.amp.GradScaler("cuda").is_enabled(),
    "torch.load(map_location='cuda')": load,
    "init_process_group('nccl')": nccl,
    "torch.cuda.current_blas_handle()": lambda: torch.cuda.current_blas_handle(),
}
result = {"objects": objects, "calls": {name: outcome(call) for name, call in calls.items()},
          "torch_infini_loaded": "torch_infini" in sys.modules}
if result["torch_infini_loaded"]:
    import torch_infini._transfer as transfer
    result["enabled"] = transfer.is_enabled()
    result["changes"] = len(transfer.changes())
print("RESULT" + json.dumps(result))
''')


def _run(code: str, args: list[str], env_changes: dict[str, str | None]) -> object:
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    for name, value in env_changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT")]
    assert proc.returncode == 0 and lines, (proc.stdout + proc.stderr)[-4000:]
    return json.loads(lines[-1][len("RESULT"):])


@pytest.fixture(scope="module")
def runs() -> dict:
    targets = _run(LIST_CHANGES, [], {"TORCH_INFINI_TRANSFER_CUDA": None})
    off = _run(PROBE, [json.dumps(targets)], {"TORCH_INFINI_TRANSFER_CUDA": None})
    alone = _run(PROBE, [json.dumps(targets)], {"TORCH_INFINI_TRANSFER_CUDA": None,
                                                "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    return {"targets": targets, "off": off, "alone": alone}


def test_the_runs_are_what_they_claim(runs):
    assert runs["off"]["torch_infini_loaded"] and not runs["alone"]["torch_infini_loaded"]
    assert runs["off"]["enabled"] is False and runs["off"]["changes"] == 0
    assert len(runs["targets"]) > 100, "the switch lists what it changes"


def test_every_object_the_switch_replaces_is_pytorchs_own_when_off(runs):
    off, alone = runs["off"]["objects"], runs["alone"]["objects"]
    assert len(off) > 100
    changed = {label: (off[label], alone.get(label)) for label in off if off[label] != alone.get(label)}
    assert not changed, changed
    ours = [label for label, fp in off.items() if fp[3] and "torch_infini" in fp[3]]
    assert not ours, ours


def test_cuda_calls_fail_as_on_cpu_only_pytorch(runs):
    off, alone = runs["off"]["calls"], runs["alone"]["calls"]
    assert off.keys() == alone.keys()
    for name in off:
        assert off[name] == alone[name], f"{name}: with torch_infini {off[name]}, PyTorch alone {alone[name]}"
    # and they do fail: the oracle is a CPU-only PyTorch
    assert off["torch.zeros(device='cuda')"][0] == "error"
    assert off["torch.cuda.is_available()"] == ["ok", "False", []]
