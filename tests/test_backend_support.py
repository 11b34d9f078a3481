"""The InfiniOps support matrices (torch_infini/data/infiniops_<pin>.json),
the tool that writes them (tools/infiniops_matrix.py), and the binding rules
that map ATen overloads onto their operators (torch_infini.backend_support).

Oracles: ATen's own schemas (the running PyTorch's), InfiniOps' naming rule
for generated operators, the build's binding rules
(torch_infini/infiniops_binding.py), torch-infini's C++ sources (which kernels the
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
from torch_infini import infiniops_binding as rules
from torch_infini._guard import major_minor

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
    becomes internal_, an in-place trailing _ is dropped). The build's rules
    (torch_infini.infiniops_binding) decide what is bound: an .out overload
    they give a signature serves itself and its functional and in-place
    forms; random overloads (the host draws them) and those writing an input
    (batch norm's running statistics) are not bound."""
    schemas = {s.qualified: s for s in rules.aten_schemas_from_torch()}
    bindings = support.aten_bindings(pin)
    matrix = support.load_matrix(pin)
    operators = matrix["operators"]
    generated_with = tuple(int(v) for v in major_minor(matrix["generated_with"]["torch"]).split("."))
    running = tuple(int(v) for v in major_minor(torch.__version__).split("."))
    seen = bound = 0
    for name, row in operators.items():
        for overload in row["aten_out"]:
            seen += 1
            if overload not in schemas:
                # Removed by a PyTorch later than the one the matrix was
                # generated with (aten::cholesky and aten::qr, with 2.14):
                # the running release has nothing to bind it to.
                assert running > generated_with, (name, overload)
                assert name not in bindings.get(overload, ()), (name, overload)
                continue
            base = overload.split("::")[1].split(".")[0]
            public = ("internal_" if base.startswith("_") else "") + base.lstrip("_")
            assert public.removesuffix("_") == name, (name, overload)
            why_not = rules.generated_signature(schemas[overload])
            if not isinstance(why_not, str):
                bound += 1
                for twin in support.aten_twins(overload):
                    assert name in bindings[twin], (name, overload, twin)
            else:
                assert name not in bindings.get(overload, ()), (overload, why_not)
    assert seen > 400 and bound > 350  # the generated operators are there, and most bind
    # Namespaced classes bind too (internal::Softmax, linalg::Det, special::Erf,
    # fft::Fft), and operators InfiniOps generates from in-place schemas
    # (MaskedFill(input, mask, value, out) from masked_fill_.Scalar).
    for overload, name in (("aten::_softmax.out", "internal_softmax"), ("aten::linalg_det.out", "linalg_det"),
                           ("aten::special_erf.out", "special_erf"), ("aten::fft_fft.out", "fft_fft"),
                           ("aten::masked_fill.Scalar", "masked_fill"), ("aten::masked_fill_.Tensor", "masked_fill"),
                           ("aten::divide.Scalar", "divide")):
        assert name in bindings[overload], overload


def test_coverage_binds_with_the_builds_rules():
    """The package's binding rules are the module the build loads
    (setup.py and tools/infiniops_binding.py load torch_infini/infiniops_binding.py
    by path): one copy of the rules."""
    shim = _load_tool("infiniops_binding")
    # The checkout's file, which is the imported module's where the checkout
    # is built in place (not where torch_infini is installed from a wheel).
    assert Path(shim.RULES).resolve() == (ROOT / "torch_infini" / "infiniops_binding.py").resolve()
    assert Path(shim.RULES).read_bytes() == Path(rules.__file__).read_bytes()
    setup = (ROOT / "setup.py").read_text()
    assert "load_rules()" in setup and "def bind(" not in setup


def test_aten_twins_are_atens_functional_inplace_and_out_forms():
    assert support.aten_twins("aten::abs.out") == ["aten::abs", "aten::abs.out", "aten::abs_"]
    assert support.aten_twins("aten::sum.IntList_out") == ["aten::sum.IntList_out", "aten::sum.dim_IntList"]
    assert "aten::pow_.Scalar" in support.aten_twins("aten::pow.Tensor_Scalar_out")
    assert "aten::pow.Scalar" not in support.aten_twins("aten::pow.Tensor_Scalar_out")


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
    # ops/arithmetic.cpp's table: add runs on InfiniOps' Add; mul on Mul
    # through the generic binding (above); sub has no hand-mapped server.
    for op in ("add", "mul"):
        assert {n for n in _impl_names(["arithmetic.cpp"]) if n.startswith(f"aten::{op}")} == {
            k for k, v in support.PROVIDER_TODAY.items() if v == op}, op


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


def test_served_means_the_provider_runs_it_as_well_as_infiniops_could():
    """`today` (shown as 'served'): the generic binding or a hand-written
    entry runs the overload at its status there. _softmax is native on
    nvidia through InfiniOps' Softmax, whose API is not _softmax's (no entry
    adapts it yet); the generic binding serves it only ATen-backed."""
    assert support.classify("aten::abs", "nvidia") == support.Verdict("aten", ("abs",), True)
    assert support.classify("aten::mm", "cpu").today  # the Gemm entry
    softmax = support.classify("aten::_softmax", "nvidia")
    assert softmax.status == "native" and not softmax.today
    assert support.classify("aten::_softmax", "cpu").today  # ATen-backed there, as bound
    assert not support.classify("aten::bernoulli.p", "cpu").today  # not bound: the host draws it


@pytest.mark.parametrize("backend", support.BACKENDS)
def test_bound_overloads_by_how_each_backend_serves_them(backend):
    """Every bound overload once: native where one of its operators is native
    there, else ATen-backed only where one is ATen-backed, else absent."""
    found = support.bound_by_status(backend)
    bound = support.aten_bindings()
    assert sorted(found["native"] + found["aten"] + found["absent"]) == sorted(bound)
    operators = support.load_matrix()["operators"]
    for status, overloads in found.items():
        for overload in overloads:
            statuses = {operators[op]["backends"][backend] for op in bound[overload]}
            best = "native" if "native" in statuses else "aten" if "aten" in statuses else "absent"
            assert best == status, (overload, statuses)
    # What classify says of a served overload agrees.
    for overload in found["native"][:20]:
        assert support.classify(overload, backend).status in ("native", "composite")


def test_nvidia_serves_natively_what_its_native_kernels_serve():
    """At the current pin NVIDIA registers 49 native operators (the
    matrix); the overloads bound to them are its native ones, the rest of
    the 1,340 bound overloads need InfiniOps WITH_TORCH=ON and a CUDA
    PyTorch."""
    found = support.bound_by_status("nvidia")
    assert "aten::mm.out" in found["native"] and "aten::addmm" in found["native"]
    assert "aten::erf.out" in found["aten"]
    assert support.torch_device("nvidia") == "cuda"


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
    # The PyTorch device each backend's ATen-backed implementations run on.
    "src/torch/device_.h": textwrap.dedent("""\
        template <>
        struct TorchDeviceName<Device::Type::kCpu> {
          static constexpr std::string_view kValue{"cpu"};
        };

        template <>
        struct TorchDeviceName<Device::Type::kNvidia> {
          static constexpr std::string_view kValue{"cuda"};
        };

        template <>
        struct TorchDeviceName<Device::Type::kAscend> {
          static constexpr std::string_view kValue{"npu"};
        };
        """),
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
    assert matrix["torch_devices"] == {"cpu": "cpu", "nvidia": "cuda", "ascend": "npu"}
    assert matrix["infiniops"]["commit"] == subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True,
                                                           text=True).stdout.strip()
    assert matrix["generated_with"]["torch"] == torch.__version__
    assert not list(repo.glob("generated")), "the repository is not written to"
