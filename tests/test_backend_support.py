"""The InfiniOps support matrices (torch_infini/data/infiniops_<pin>.json),
the tool that writes them (tools/infiniops_matrix.py), and the binding rules
that map ATen overloads onto their operators (torch_infini.backend_support).

Oracles: ATen's own schemas (the running PyTorch's), InfiniOps' naming rule
for generated operators, the shared binding module where it is in the tree
(tools/infiniops_binding.py), torch-infini's C++ sources (which kernels the
device runs itself, which overloads the Infini provider maps), and a small
InfiniOps-shaped tree built by the test for the tool.
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from torch_infini import backend_support as support

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _load_tool(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("pin", [support.CURRENT_PIN, support.BASELINE_PIN])
def test_a_matrix_per_supported_pin_naming_the_commit(pin):
    matrix = support.load_matrix(pin)
    full = matrix["infiniops"]["commit"]
    assert full.startswith(pin) and len(full) == 40
    assert f"`{full}`" in README, "the README's pin table names the same commit"
    assert matrix["backends"] == list(support.BACKENDS)
    for backend, counts in matrix["summary"].items():
        assert sum(counts.values()) == len(matrix["operators"]), backend


def test_an_unknown_pin_names_the_supported_ones():
    with pytest.raises(ValueError, match="no InfiniOps support matrix for pin 'deadbee'.*2962714"):
        support.load_matrix("deadbee")


@pytest.mark.parametrize("pin", [support.CURRENT_PIN, support.BASELINE_PIN])
def test_each_cell_follows_from_its_implementations(pin):
    """native <=> a default-build native kernel, found in the backend's own
    folder (a shared CUDA kernel counts only where the backend registers it);
    aten <=> otherwise an ATen-backed one (generated, index 8, or src/torch)."""
    for name, row in support.load_matrix(pin)["operators"].items():
        for backend in support.BACKENDS:
            impls = row["implementations"].get(backend, [])
            kinds = {i.split(":")[0] for i in impls}
            status = row["backends"][backend]
            assert (status == "native") == ("native" in kinds), (name, backend)
            if status != "native":
                assert (status == "aten") == ("torch" in kinds or bool(row["aten_out"])), (name, backend)
            for impl in impls:
                kind, index, path = impl.split(":", 2)
                if kind in ("native", "linked"):
                    assert backend in Path(path).parts, (name, backend, impl)


@pytest.mark.parametrize("pin", [support.CURRENT_PIN, support.BASELINE_PIN])
def test_generated_operators_agree_with_aten_and_the_binding_rules(pin):
    """Every overload an operator's generated ATen backend mirrors is an ATen
    overload of the running PyTorch, named by InfiniOps' rule (a leading _
    becomes internal_, an in-place trailing _ is dropped); the binding rules
    send it, with its functional and in-place forms, to that operator."""
    schemas = {f"{s.name}.{s.overload_name}" if s.overload_name else s.name
               for s in torch._C._jit_get_all_schemas()}
    bindings = support.aten_bindings(pin)
    operators = support.load_matrix(pin)["operators"]
    seen = 0
    for name, row in operators.items():
        for overload in row["aten_out"]:
            seen += 1
            assert overload in schemas, (name, overload)
            base = overload.split("::")[1].split(".")[0]
            public = ("internal_" if base.startswith("_") else "") + base.lstrip("_")
            assert public.removesuffix("_") == name, (name, overload)
            if support.writes_an_input(overload):  # batch norm's running statistics: not bound
                assert overload not in bindings, overload
                continue
            for twin in support.aten_twins(overload):
                assert name in bindings[twin], (name, overload, twin)
    assert seen > 400  # the generated operators are there


def test_aten_twins_are_atens_functional_inplace_and_out_forms():
    assert support.aten_twins("aten::abs.out") == ["aten::abs", "aten::abs.out", "aten::abs_"]
    assert support.aten_twins("aten::sum.IntList_out") == ["aten::sum.IntList_out", "aten::sum.dim_IntList"]
    assert "aten::pow_.Scalar" in support.aten_twins("aten::pow.Tensor_Scalar_out")
    assert "aten::pow.Scalar" not in support.aten_twins("aten::pow.Tensor_Scalar_out")


def _shared_binding_module():
    path = ROOT / "tools" / "infiniops_binding.py"
    if not path.exists():
        pytest.skip("the shared binding module (tools/infiniops_binding.py, generic-InfiniOps work) "
                    "is not in this tree yet; test_generated_operators_agree_with_aten_and_the_binding_rules "
                    "checks the interim rules")
    return _load_tool("infiniops_binding")


def test_the_matrix_agrees_with_the_shared_binding_module():
    """Every .out overload of the matrix that the shared rules can bind goes
    to the operator of the same public name; what they leave out is an
    in-place overload (served through its .out form), a random one (the
    host draws it), or one the interim rules leave out too (it writes an
    input: batch norm's running statistics)."""
    rules = _shared_binding_module()
    schemas = {s.qualified: s for s in rules.aten_schemas_from_torch()}
    for name, row in support.load_matrix(support.CURRENT_PIN)["operators"].items():
        for overload in row["aten_out"]:
            schema = schemas[overload]
            assert rules.public_name(schema.name) == name, overload
            why_not = rules.expected_signature(schema)
            if isinstance(why_not, str) and not schema.name.endswith("_") and not support.is_random(overload):
                assert overload not in support.aten_bindings(), (overload, why_not)


# --- what torch-infini runs itself, and what its provider maps ---------------

def _impl_names(files: list[str]) -> set[str]:
    names = set()
    for f in files:
        names |= {f"aten::{m}" for m in re.findall(r'm\.impl\("([\w.]+)"', (ROOT / "csrc" / "ops" / f).read_text())}
    return names


def test_device_run_overloads_are_the_devices_own_kernels():
    own = _impl_names(["views.cpp", "copy.cpp", "factory.cpp", "fill.cpp", "streams.cpp", "shallow_copy.cpp",
                       "random/random_distributions.cpp", "random/random_sampling.cpp"])
    assert own - {"aten::native_dropout"} == set(support.DEVICE_RUN)
    assert _impl_names(["nn/rnn_cells.cpp"]) | {"aten::native_dropout"} == set(support.COMPOSED)


def test_provider_today_lists_what_the_infini_provider_maps():
    """Every overload the hand-mapped Infini provider's servers name is in
    PROVIDER_TODAY, with the InfiniOps operator the server runs on."""
    servers = {"infini_gemm.cpp": "gemm", "infini_cat.cpp": "cat"}
    for file, op in servers.items():
        text = (ROOT / "csrc" / "runtime" / "infini" / file).read_text()
        for overload in set(re.findall(r'"(aten::[\w.]+)"', text)) - {"aten::cat"}:
            assert support.PROVIDER_TODAY.get(overload) == op, (file, overload)
    # Mul, Relu and Silu are entries of the generic InfiniOps binding (their
    # native limits in infini_native.cpp), which binds by signature, naming
    # no overload: their overloads are ATen's mul/relu/silu forms.
    native = (ROOT / "csrc" / "runtime" / "infini" / "infini_native.cpp").read_text()
    for kernel in ("Mul", "Relu", "Silu"):
        assert f"infini::ops::{kernel}" in native
        assert any(v == kernel.lower() for v in support.PROVIDER_TODAY.values()), kernel
    assert _impl_names(["add.cpp"]) <= {k for k, v in support.PROVIDER_TODAY.items() if v == "add"}


@pytest.mark.parametrize("backend", support.BACKENDS)
def test_classify_follows_the_matrix(backend):
    operators = support.load_matrix()["operators"]
    for overload, ops in support.aten_bindings().items():
        verdict = support.classify(overload, backend)
        statuses = {operators[op]["backends"][backend] for op in ops}
        if "native" in statuses:
            assert verdict.status == "native", overload
        elif verdict.status not in ("device", "composite"):
            assert verdict.status == ("aten" if "aten" in statuses else "unserved"), overload
    assert support.classify("aten::view", backend).status == "device"
    assert support.classify("aten::transpose.int", backend).status == "device"  # a view by its schema


def test_classify_rejects_an_unknown_backend():
    with pytest.raises(ValueError, match="unknown InfiniOps backend 'cuda'"):
        support.classify("aten::mm", "cuda")


# --- the tool, on a small InfiniOps-shaped tree ------------------------------

_FILES = {
    "src/base/gelu.h": "class Gelu : public Operator<Gelu> {\n};\n",
    "src/base/swiglu.h": 'class [[deprecated("Use `SiluAndMul` instead.")]] Swiglu\n    : public Operator<Swiglu> {\n};\n',
    "src/base/unused.h": "class Unused : public Operator<Unused> {\n};\n",
    "src/native/cuda/ops/gelu/kernel.h": "template <typename R> class CudaGelu : public Gelu {};\n",
    "src/native/cuda/nvidia/ops/gelu/kernel.h":
        "template <>\nclass Operator<Gelu, Device::Type::kNvidia>\n    : public CudaGelu<Runtime<Device::Type::kNvidia>> {};\n",
    "src/native/cuda/metax/ops/gelu/kernel.h":
        "template <>\nclass Operator<Gelu, Device::Type::kMetax> : public CudaGelu<R> {};\n",
    # A header in the wrong backend's folder is not compiled for it.
    "src/native/cuda/nvidia/ops/swiglu/kernel.h": "class Operator<Swiglu, Device::Type::kMoore> {};\n",
    "src/native/cpu/ops/swiglu/swiglu.h": "class Operator<Swiglu, Device::Type::kCpu> : public Swiglu {};\n",
    "src/torch/ops/swiglu/swiglu.h": "template <Device::Type kDev>\nclass Operator<Swiglu, kDev, 1> : public Swiglu {};\n",
    "src/torch/ops/swiglu/swiglu.cc": "template class Operator<Swiglu, Device::Type::kCpu, 1>;\n"
                                      "template class Operator<Swiglu, Device::Type::kAscend, 1>;\n",
    "src/ninetoothed/ops/gelu/gelu.h": "class Operator<Gelu, Device::Type::kNvidia, 9> : public Gelu {};\n",
    # Stands for InfiniOps' generator: the tool switches its output off and
    # reads the operators it would emit.
    "scripts/generate_torch_ops.py": textwrap.dedent("""\
        import dataclasses

        @dataclasses.dataclass
        class Op:
            aten_name: str
            overload: str

        def _emit(name, ops, *, emit_base):
            raise AssertionError("the tool must not write files")

        def _write_text_if_changed(*args):
            raise AssertionError("the tool must not write files")

        def _remove_stale_files(*args):
            raise AssertionError("the tool must not write files")

        def _find_clang_format():
            return None

        def main():
            _emit("gelu", [Op("gelu", "out")], emit_base=False)
            _emit("erf", [Op("erf", "out")], emit_base=True)
            return 0
        """),
}


def test_the_tool_reads_an_infiniops_tree(tmp_path):
    repo = tmp_path / "InfiniOps"
    for rel, text in _FILES.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "tree"], check=True)
    out = tmp_path / "m.json"
    assert _load_tool("infiniops_matrix").main(["--repo", str(repo), "--pin", "HEAD", "--out", str(out)]) == 0
    matrix = json.loads(out.read_text())
    ops = matrix["operators"]
    assert sorted(ops) == ["erf", "gelu", "swiglu"]  # Unused has no implementation
    assert ops["gelu"]["aten_out"] == ["aten::gelu.out"]
    assert ops["gelu"]["backends"] == {"cpu": "aten", "nvidia": "native", "ascend": "aten", "cambricon": "aten",
                                       "metax": "native", "moore": "aten", "iluvatar": "aten", "hygon": "aten"}
    assert "ninetoothed:9:src/ninetoothed/ops/gelu/gelu.h" in ops["gelu"]["implementations"]["nvidia"]
    assert ops["swiglu"]["deprecated"] is True and ops["swiglu"]["aten_out"] == []
    assert ops["swiglu"]["backends"] == {"cpu": "native", "nvidia": "absent", "ascend": "aten",
                                         "cambricon": "absent", "metax": "absent", "moore": "absent",
                                         "iluvatar": "absent", "hygon": "absent"}
    assert set(ops["erf"]["backends"].values()) == {"aten"}
    assert matrix["infiniops"]["commit"] == subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True,
                                                           text=True).stdout.strip()
    assert matrix["generated_with"]["torch"] == torch.__version__
    assert not list(repo.glob("generated")), "the repository is not written to"
