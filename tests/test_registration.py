"""import torch_infini: PrivateUse1 renamed to "infini", torch.infini registered,
the generated Tensor/Module/Storage methods, and torch.accelerator."""

from __future__ import annotations

import pytest
import torch

import torch_infini


def test_privateuse1_backend_is_renamed():
    assert torch._C._get_privateuse1_backend_name() == "infini"


def test_torch_infini_is_the_device_module():
    assert torch.infini is torch_infini.infini
    assert torch.get_device_module("infini") is torch.infini
    # The torch.cuda-shaped API is there.
    for name in ("is_available", "device_count", "current_device", "set_device", "synchronize",
                 "device", "device_of", "Stream", "Event", "current_stream", "memory_allocated"):
        assert callable(getattr(torch.infini, name)), name


def test_torch_device_parses_infini():
    d = torch.device("infini:0")
    assert d.type == "infini"
    assert d.index == 0
    assert torch.device("infini").index is None
    assert torch.device("infini", 0) == d
    assert str(d) == "infini:0"


def test_tensor_infini_method_moves_to_device():
    cpu = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    moved = cpu.infini()
    assert moved.device == torch.device("infini:0")
    assert moved.shape == cpu.shape
    assert moved.dtype == cpu.dtype
    torch.testing.assert_close(moved.cpu(), cpu, rtol=0, atol=0)


def test_tensor_is_infini_property():
    cpu = torch.ones(2)
    assert cpu.is_infini is False
    assert cpu.infini().is_infini is True
    assert torch.empty(2, device="infini").is_infini is True


def test_module_infini_moves_parameters_and_buffers():
    module = torch.nn.Linear(3, 2)
    module.register_buffer("running", torch.arange(2, dtype=torch.float32))
    expected = {name: t.detach().clone() for name, t in module.state_dict().items()}
    returned = module.infini()
    assert returned is module
    for name, param in module.named_parameters():
        assert param.device.type == "infini", name
        assert isinstance(param, torch.nn.Parameter)
    assert module.running.device.type == "infini"
    for name, t in module.state_dict().items():
        torch.testing.assert_close(t.cpu(), expected[name], rtol=0, atol=0)


def test_module_to_infini_string():
    module = torch.nn.Linear(2, 2).to("infini")
    assert {p.device for p in module.parameters()} == {torch.device("infini:0")}


def test_untyped_storage_infini_method():
    cpu = torch.arange(4, dtype=torch.int32)
    storage = cpu.untyped_storage().infini()
    assert storage.device.type == "infini"
    assert storage.nbytes() == cpu.untyped_storage().nbytes()
    assert storage.is_infini


def test_accelerator_is_infini():
    assert torch.accelerator.is_available()
    acc = torch.accelerator.current_accelerator()
    assert acc is not None
    assert acc.type == "infini"
    assert torch.accelerator.device_count() == torch.infini.device_count()


def test_module_to_infini_keeps_parameter_objects():
    """As on CUDA, Module.to() swaps each Parameter's data in place: tied
    weights stay tied and an optimizer built before .to() still holds them."""
    encoder = torch.nn.Linear(3, 3, bias=False)
    decoder = torch.nn.Linear(3, 3, bias=False)
    decoder.weight = encoder.weight
    model = torch.nn.ModuleDict({"encoder": encoder, "decoder": decoder})
    weight = encoder.weight
    weight.grad = torch.ones(3, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.to("infini")
    assert model["encoder"].weight is weight and model["decoder"].weight is weight
    assert weight.device.type == "infini" and weight.grad.device.type == "infini"
    assert optimizer.param_groups[0]["params"][0] is weight
    model.cpu()
    assert weight.device.type == "cpu" and model["decoder"].weight is weight


def test_parameter_data_assignment_across_devices():
    param = torch.nn.Parameter(torch.zeros(2))
    param.data = torch.arange(2.0).to("infini")
    assert isinstance(param, torch.nn.Parameter) and param.requires_grad
    assert param.device.type == "infini"
    torch.testing.assert_close(param.detach().cpu(), torch.arange(2.0), rtol=0, atol=0)
    assert torch._has_compatible_shallow_copy_type(torch.ones(1), torch.ones(1).to("infini"))
    assert torch._has_compatible_shallow_copy_type(torch.ones(1).to("infini"), torch.ones(1))


def _families() -> list[dict]:
    return torch_infini._C._aten_op_families()


def test_every_family_overload_has_an_infini_kernel():
    for family in _families():
        for name in family["overloads"] + family["custom"]:
            if name.endswith(".out") and name in family["custom"]:
                continue
            assert torch._C._dispatch_has_kernel_for_dispatch_key(name, "PrivateUse1"), name


def _aten_registrations() -> list[str]:
    return sorted(n for n in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
                  if n.startswith("aten::"))


def test_no_composite_implicit_overload_is_overridden():
    """A PrivateUse1 kernel on a CompositeImplicitAutograd overload would
    bypass the autograd formula of its decomposition; only overloads that also
    have a CPU kernel (which the CPU runs instead of the composite) have one."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    own = {"aten::_has_compatible_shallow_copy_type"}  # ops/shallow_copy.cpp: no computation
    for name in _aten_registrations():
        if has(name, "CompositeImplicitAutograd") and name not in own:
            assert has(name, "CPU"), name


def test_every_cpu_operator_has_an_infini_kernel():
    """The generic kernel is registered from the dispatcher's table: every aten
    overload with a CPU kernel has an infini kernel, except views (ops/views.cpp
    serves those with CPU kernels) and random operators (ops/random/random_*.cpp)."""
    generic = {row["op"] for row in torch_infini._C._generic_aten_ops()}
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    missing = []
    for schema in torch._C._jit_get_all_schemas():
        name = schema.name + (f".{schema.overload_name}" if schema.overload_name else "")
        if not name.startswith("aten::"):
            continue
        try:
            if not has(name, "CPU") or has(name, "PrivateUse1"):
                continue
        except RuntimeError:  # a schema without a dispatcher entry (a JIT builtin)
            continue
        random = any(w in name for w in ("normal", "uniform", "bernoulli", "dropout", "multinomial",
                                         "exponential", "random", "rand"))
        view = any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)
        if not (view or (random and not any("Generator" in str(a.type) for a in schema.arguments))):
            missing.append(name)
    assert not missing, missing
    assert len(generic) > 800
    reasons = {row["op"]: row["sync_reason"] for row in torch_infini._C._generic_aten_ops()}
    assert reasons["aten::nonzero"] and reasons["aten::unique_consecutive"] and reasons["aten::is_set_to"]
    assert reasons["aten::cos.out"] == ""


def test_operator_table_lists_every_family():
    """On the host runtime the table says that every operator with a CPU
    kernel runs (the Infini stack lists the families InfiniOps serves)."""
    if torch_infini.diagnostics()["provider"] != "host":
        pytest.skip("the Infini stack lists only the families InfiniOps serves")
    ops = " ".join(row["op"] for row in torch_infini.operator_table())
    assert "every other ATen operator with a CPU kernel" in ops


def test_ops_listing_names_the_path_of_each_operator():
    rows = {row["op"]: row for row in torch_infini.registered_operators()}
    assert "queued" in rows["aten::cos.out"]["note"]
    assert "synchronizing" in rows["aten::nonzero"]["note"]
