"""torch.save / torch.load of infini tensors, storages, modules and optimizer
state: every map_location form, views and shared storages, and checkpoints
loaded in other processes (host provider forced, or without torch_infini).

PyTorch's PrivateUse1 path does the work: storages are tagged "infini:N" at
save time (``location_tag``), written through a copy to the CPU, and restored
with ``UntypedStorage.to(device)`` (our copies) and ``Tensor.set_`` (our
``set_.source_Storage_storage_offset``); one storage per key, so views stay
views of one storage.
"""

from __future__ import annotations

import io
import json
import os
import warnings
from typing import Any

import pytest
import torch

import torch_infini
from conftest import run_python

DEV = torch.device("infini:0")


def round_trip(obj: Any, **load_kwargs: Any) -> Any:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    buffer.seek(0)
    return torch.load(buffer, **load_kwargs)


def assert_same(actual: torch.Tensor, expected: torch.Tensor, device: torch.device | str) -> None:
    assert actual.device == torch.device(device)
    assert actual.dtype == expected.dtype
    assert actual.shape == expected.shape
    assert actual.stride() == expected.stride()
    torch.testing.assert_close(actual.cpu(), expected.cpu(), rtol=0, atol=0)


SAMPLE = torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5.5


def _to_cpu_storage(storage, location):
    return storage


def _to_infini_storage(storage, location):
    return storage.infini()


# (map_location, device of the loaded tensor) for a checkpoint saved on infini:0.
MAP_LOCATIONS = [
    pytest.param(None, "infini:0", id="none"),
    pytest.param("infini", "infini:0", id="str-infini"),
    pytest.param("infini:0", "infini:0", id="str-infini0"),
    pytest.param("cpu", "cpu", id="str-cpu"),
    pytest.param(torch.device("infini:0"), "infini:0", id="device-infini0"),
    pytest.param(torch.device("cpu"), "cpu", id="device-cpu"),
    pytest.param({"infini:0": "cpu"}, "cpu", id="dict-to-cpu"),
    pytest.param({"cuda:0": "cpu"}, "infini:0", id="dict-unrelated"),
    pytest.param(_to_cpu_storage, "cpu", id="function-keep-cpu"),
    pytest.param(_to_infini_storage, "infini:0", id="function-to-infini"),
    pytest.param(lambda storage, location: None, "infini:0", id="function-none-default"),
]


@pytest.mark.parametrize("map_location,expected_device", MAP_LOCATIONS)
def test_tensor_saved_on_infini(map_location, expected_device):
    loaded = round_trip(SAMPLE.to(DEV), map_location=map_location)
    assert_same(loaded, SAMPLE, expected_device)


@pytest.mark.parametrize("map_location", ["infini", "infini:0", torch.device("infini"), {"cpu": "infini:0"},
                                          _to_infini_storage], ids=["str", "str0", "device", "dict", "function"])
def test_cpu_checkpoint_loads_onto_infini(map_location):
    loaded = round_trip(SAMPLE, map_location=map_location)
    assert_same(loaded, SAMPLE, "infini:0")


@pytest.mark.parametrize("weights_only", [True, False])
def test_weights_only_and_full_unpickler(weights_only):
    loaded = round_trip({"x": SAMPLE.to(DEV), "n": 3}, weights_only=weights_only)
    assert loaded["n"] == 3
    assert_same(loaded["x"], SAMPLE, "infini:0")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int8,
                                   torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool], ids=str)
def test_dtypes_round_trip_exactly(dtype):
    cpu = (torch.arange(-8, 8) % 5).to(dtype)
    assert_same(round_trip(cpu.to(DEV)), cpu, "infini:0")
    assert_same(round_trip(cpu.to(DEV), map_location="cpu"), cpu, "cpu")


@pytest.mark.parametrize("shape", [(), (0,), (2, 0, 3)], ids=str)
def test_scalar_and_empty_tensors(shape):
    cpu = torch.full(shape, 7.0)
    assert_same(round_trip(cpu.to(DEV)), cpu, "infini:0")


def test_parameter_and_requires_grad_survive():
    param = torch.nn.Parameter(SAMPLE.to(DEV))
    loaded = round_trip(param)
    assert isinstance(loaded, torch.nn.Parameter)
    assert loaded.requires_grad
    assert_same(loaded.detach(), SAMPLE, "infini:0")
    leaf = SAMPLE.to(DEV).requires_grad_()
    assert round_trip(leaf, map_location="cpu").requires_grad


def test_legacy_format_round_trip():
    buffer = io.BytesIO()
    torch.save({"x": SAMPLE.to(DEV)}, buffer, _use_new_zipfile_serialization=False)
    for map_location, device in ((None, "infini:0"), ("cpu", "cpu")):
        buffer.seek(0)
        assert_same(torch.load(buffer, map_location=map_location)["x"], SAMPLE, device)


@pytest.mark.parametrize("map_location", [None, "cpu", "infini"])
def test_mmap_load(tmp_path, map_location):
    path = tmp_path / "ckpt.pt"
    torch.save({"x": SAMPLE.to(DEV)}, path)
    loaded = torch.load(path, mmap=True, map_location=map_location)["x"]
    assert_same(loaded, SAMPLE, "cpu" if map_location == "cpu" else "infini:0")


# --- views and shared storages --------------------------------------------------


@pytest.mark.parametrize("map_location,device", [(None, "infini:0"), ("cpu", "cpu"), ("infini", "infini:0"),
                                                 ({"infini:0": "cpu"}, "cpu")], ids=["none", "cpu", "infini", "dict"])
def test_views_stay_views_of_one_storage(map_location, device):
    base = torch.arange(24, dtype=torch.float32).to(DEV)
    views = {
        "base": base,
        "slice": base[2:10],
        "transposed": base.view(4, 6).t(),
        "strided": base[1::3],
        "narrow_2d": base.view(4, 6)[1:3, 2:5],
    }
    loaded = round_trip(views, map_location=map_location)
    storage = loaded["base"].untyped_storage()
    for name, original in views.items():
        t = loaded[name]
        assert t.untyped_storage().data_ptr() == storage.data_ptr(), name
        assert t.storage_offset() == original.storage_offset(), name
        assert t.stride() == original.stride(), name
        assert_same(t, original, device)
    # Writing through one view is seen through the others: one storage.
    loaded["slice"].copy_(torch.full((8,), -1.0))
    expected = torch.arange(24, dtype=torch.float32)
    expected[2:10] = -1.0
    torch.testing.assert_close(loaded["base"].cpu(), expected, rtol=0, atol=0)
    torch.testing.assert_close(loaded["transposed"].cpu(), expected.view(4, 6).t(), rtol=0, atol=0)


def test_tied_weights_stay_tied():
    """Two modules sharing one Parameter (tied embeddings) load sharing it."""
    encoder = torch.nn.Linear(4, 4, bias=False)
    decoder = torch.nn.Linear(4, 4, bias=False)
    decoder.weight = encoder.weight
    model = torch.nn.ModuleDict({"encoder": encoder, "decoder": decoder}).to(DEV)
    for map_location in (None, "cpu"):
        state = round_trip(model.state_dict(keep_vars=True), map_location=map_location)
        assert state["encoder.weight"].untyped_storage().data_ptr() == \
            state["decoder.weight"].untyped_storage().data_ptr()
        loaded = round_trip(model, map_location=map_location, weights_only=False)
        assert loaded["encoder"].weight is loaded["decoder"].weight


def test_untyped_storage_round_trip():
    storage = SAMPLE.to(DEV).untyped_storage()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage deprecation
        loaded = round_trip(storage)
        cpu_loaded = round_trip(SAMPLE.untyped_storage())
        assert type(loaded) is type(cpu_loaded)
        assert loaded.device == DEV
        assert loaded.nbytes() == storage.nbytes()
        moved = round_trip(storage, map_location="cpu")
        assert moved.device.type == "cpu"
        assert bytes(moved.untyped()) == bytes(SAMPLE.untyped_storage())


def test_typed_storage_round_trip():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage deprecation
        storage = SAMPLE.to(DEV).storage()
        loaded = round_trip(storage)
        assert loaded.device == DEV
        assert loaded.dtype == torch.float32
        assert loaded.size() == 12
        assert list(loaded.cpu()) == SAMPLE.flatten().tolist()


def test_storage_infini_methods():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        assert torch.UntypedStorage(8).infini().device == DEV
        typed = torch.FloatStorage(4).infini()
        assert typed.device == DEV and typed.dtype == torch.float32


# --- modules and optimizers --------------------------------------------------------


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.BatchNorm1d(5), torch.nn.Linear(5, 3))


@pytest.mark.parametrize("map_location", [None, "infini", "cpu", {"infini:0": "cpu"}],
                         ids=["none", "infini", "cpu", "dict"])
def test_module_state_dict_round_trip(map_location):
    cpu_model = _model()
    cpu_model[1].running_mean.fill_(0.25)
    cpu_model[1].num_batches_tracked.fill_(7)
    expected = {k: v.clone() for k, v in cpu_model.state_dict().items()}
    model = _model().to(DEV)
    model.load_state_dict(cpu_model.state_dict())
    loaded = round_trip(model.state_dict(), map_location=map_location)
    device = "cpu" if map_location in ("cpu",) or isinstance(map_location, dict) else "infini:0"
    assert list(loaded) == list(expected)
    for name, tensor in loaded.items():
        assert_same(tensor, expected[name], device)
    # It loads back into a module on either side.
    fresh = _model()
    fresh.load_state_dict(loaded)
    fresh_infini = _model().to(DEV)
    fresh_infini.load_state_dict(loaded)
    for name, tensor in fresh_infini.state_dict().items():
        assert_same(tensor, expected[name], "infini:0")
        torch.testing.assert_close(fresh.state_dict()[name], expected[name], rtol=0, atol=0)


def test_whole_module_round_trip():
    model = _model().to(DEV)
    loaded = round_trip(model, weights_only=False)
    assert isinstance(loaded, torch.nn.Sequential)
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert_same(b, a, "infini:0")


@pytest.mark.parametrize("optimizer", ["sgd-momentum", "adam"])
@pytest.mark.parametrize("map_location", [None, "cpu", "infini"])
def test_optimizer_state_dict_round_trip(optimizer, map_location):
    """Optimizer state built on the CPU, moved to infini by load_state_dict,
    saved from infini and loaded back into an optimizer over infini
    parameters: every state tensor equal and where the parameters are."""
    def make(params):
        if optimizer == "adam":
            return torch.optim.Adam(params, lr=1e-2)
        return torch.optim.SGD(params, lr=1e-2, momentum=0.9)

    cpu_model = _model()
    cpu_opt = make(cpu_model.parameters())
    cpu_model(torch.randn(4, 6)).sum().backward()
    cpu_opt.step()
    model = _model().to(DEV)
    model.load_state_dict(cpu_model.state_dict())
    opt = make(model.parameters())
    opt.load_state_dict(cpu_opt.state_dict())
    loaded = round_trip(opt.state_dict(), map_location=map_location)
    fresh = make(model.parameters())
    fresh.load_state_dict(loaded)
    expected = cpu_opt.state_dict()
    assert loaded["param_groups"] == expected["param_groups"]
    params = list(model.parameters())
    for index, state in expected["state"].items():
        restored = fresh.state[params[index]]
        assert set(restored) == set(state)
        for key, value in state.items():
            if key == "step":
                # load_state_dict leaves a non-capturable step where torch.load
                # put it (as on CUDA): on the CPU unless mapped to infini.
                assert restored[key].device.type == ("infini" if map_location == "infini" else "cpu")
                torch.testing.assert_close(restored[key].cpu(), value, rtol=0, atol=0)
            else:
                assert_same(restored[key], value, "infini:0")


# --- other processes -------------------------------------------------------------------

LOAD_SCRIPT = """
import json, sys, torch
{imports}
result = {{}}
for name, kwargs in {cases!r}:
    try:
        ckpt = torch.load({path!r}, **kwargs)
        result[name] = {{k: [str(v.device), v.cpu().tolist(), v.storage_offset(),
                             v.untyped_storage().data_ptr() == ckpt["base"].untyped_storage().data_ptr()]
                        for k, v in ckpt.items()}}
    except Exception as e:
        result[name] = {{"error": type(e).__name__ + ": " + str(e).splitlines()[0]}}
{extra}
print("RESULT" + json.dumps(result))
"""


def _checkpoint(tmp_path) -> tuple[str, dict[str, torch.Tensor]]:
    base = torch.arange(6, dtype=torch.float32).to(DEV)
    ckpt = {"base": base, "view": base[2:5], "weight": torch.nn.Linear(2, 2).weight.detach().to(DEV)}
    path = str(tmp_path / "ckpt.pt")
    torch.save(ckpt, path)
    return path, ckpt


def _load_elsewhere(script: str, env: dict[str, str]) -> dict:
    proc = run_python(script, env=env)
    assert proc.returncode == 0, proc.stderr
    line = [l for l in proc.stdout.splitlines() if l.startswith("RESULT")]
    assert line, proc.stdout + proc.stderr
    return json.loads(line[-1][len("RESULT"):])


def _check_loaded(result: dict, ckpt: dict[str, torch.Tensor], device: str) -> None:
    assert "error" not in result, result
    for name, tensor in ckpt.items():
        got_device, values, offset, shares_base = result[name]
        assert got_device == device
        assert values == tensor.cpu().tolist()
        assert offset == tensor.storage_offset()
        assert shares_base == (name != "weight")


def test_checkpoint_loads_in_a_process_with_the_host_provider_forced(tmp_path):
    path, ckpt = _checkpoint(tmp_path)
    cases = [("cpu", {"map_location": "cpu"}), ("infini", {"map_location": "infini"}),
             ("default", {}), ("dict", {"map_location": {"infini:0": "cpu"}})]
    script = LOAD_SCRIPT.format(imports="import torch_infini", cases=cases, path=path,
                                extra='result["provider"] = torch_infini.diagnostics()["provider"]')
    result = _load_elsewhere(script, {"TORCH_INFINI_PROVIDER": "host"})
    assert result["provider"] == "host"
    _check_loaded(result["cpu"], ckpt, "cpu")
    _check_loaded(result["dict"], ckpt, "cpu")
    _check_loaded(result["infini"], ckpt, "infini:0")
    _check_loaded(result["default"], ckpt, "infini:0")


def test_checkpoint_loads_on_the_cpu_without_torch_infini(tmp_path):
    """A plain PyTorch process (no torch_infini import) reads it with
    map_location="cpu"; without a map_location PyTorch cannot know "infini"."""
    path, ckpt = _checkpoint(tmp_path)
    cases = [("cpu", {"map_location": "cpu"}), ("default", {})]
    script = LOAD_SCRIPT.format(imports="", cases=cases, path=path, extra="")
    # `import torch` would autoload torch_infini: keep this process plain PyTorch.
    script += 'assert not hasattr(torch, "infini")\n'
    result = _load_elsewhere(script, {"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    _check_loaded(result["cpu"], ckpt, "cpu")
    assert "infini:0" in result["default"]["error"]


def test_second_device_map_locations(tmp_path):
    """infini:1 checkpoints and map_location="infini:1" (two host devices)."""
    script = f"""
import io, json, torch, torch_infini
def rt(obj, **kw):
    b = io.BytesIO(); torch.save(obj, b); b.seek(0); return torch.load(b, **kw)
x = torch.arange(4.0).to("infini:1")
r = {{
    "default": str(rt(x).device),
    "to0_dict": str(rt(x, map_location={{"infini:1": "infini:0"}}).device),
    "to0_str": str(rt(x, map_location="infini:0").device),
    "cpu_to1": str(rt(torch.ones(2), map_location="infini:1").device),
    "values": rt(x, map_location="infini:0").cpu().tolist(),
}}
try:
    rt(x, map_location="infini:5")
except RuntimeError as e:
    r["bad"] = str(e)
print("RESULT" + json.dumps(r))
"""
    result = _load_elsewhere(script, {"TORCH_INFINI_PROVIDER": "host", "TORCH_INFINI_HOST_DEVICES": "2"})
    assert result["default"] == "infini:1"
    assert result["to0_dict"] == "infini:0"
    assert result["to0_str"] == "infini:0"
    assert result["cpu_to1"] == "infini:1"
    assert result["values"] == [0.0, 1.0, 2.0, 3.0]
    assert "device 5" in result["bad"] and "device_count() is 2" in result["bad"]
