"""The generic InfiniOps binding without the Infini stack (CI cannot get it).

A stub InfiniOps install is made here: an ``operator_call_instantiations.h``
listing ``Make`` instantiations as InfiniOps writes them, and a small
``libinfiniops.so`` compiled from a few lines of C++ whose symbols are
``Operator<Op, device type, index>`` for the implementations it "has".
Against it:

* the binding rules (torch_infini/infiniops_binding.py) bind each operator to the
  ATen ``.out`` overloads of the running PyTorch whose public signature it
  has, serve in-place overloads through them, and leave the rest unbound
  with the reason;
* the implementation indices per device are read from the library's
  symbols;
* the implementation choice (csrc/runtime/infini/implementation_choice.h),
  compiled into a small program, picks the native index where the call fits
  it, else the ATen-backed one, and never an index the library lacks.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
from torch_infini import infiniops_binding as ib  # noqa: E402

CXX = shutil.which(os.environ.get("CXX", "c++"))


def _make(op: str, *params: str) -> str:
    """One ``Make`` instantiation line as InfiniOps' generator writes it."""
    first, rest = params[0], params[1:]
    template = ", ".join(f"const {p.rsplit(' ', 1)[0]}&" for p in rest)
    rest_params = "".join(f", const {p.rsplit(' ', 1)[0]}& {p.rsplit(' ', 1)[1]}" for p in rest)
    return (f"extern template std::unique_ptr<Operator<::infini::ops::{op}>> "
            f"Operator<::infini::ops::{op}>::Make<{template}>(const Config& config, "
            f"const {first}{rest_params});")


STUB_HEADER = "\n".join([
    "#ifndef INFINI_OPS_OPERATOR_CALL_INSTANTIATIONS_H_",
    "namespace infini::ops {",
    _make("Abs", "Tensor input", "Tensor out"),
    _make("Sum", "Tensor input", "std::optional<std::vector<int64_t>> dim", "bool keepdim",
          "std::optional<DataType> dtype", "Tensor out"),
    _make("Add", "Tensor input", "Tensor other", "double alpha", "Tensor out"),
    _make("Add", "Tensor input", "Tensor other", "Tensor out"),
    _make("Max", "Tensor input", "int64_t dim", "bool keepdim", "Tensor max", "Tensor max_values"),
    _make("Clamp", "Tensor input", "std::optional<double> min", "std::optional<double> max", "Tensor out"),
    _make("Clone", "Tensor input", "Tensor out"),
    _make("Cat", "std::vector<Tensor> tensors", "int64_t dim", "Tensor out"),
    _make("Bernoulli", "Tensor input", "Tensor out"),
    _make("Gemm", "Tensor a", "Tensor b", "std::optional<float> alpha", "Tensor y"),
    # ATen's _softmax: a class in a namespace, as InfiniOps generates ATen's _, linalg_, special_, fft_ names.
    _make("internal::Softmax", "Tensor input", "int64_t dim", "bool half_to_float", "Tensor out"),
    # Generated from the in-place divide_.Scalar (ATen has no divide.Scalar_out): an out= form.
    _make("Divide", "Tensor input", "double other", "Tensor out"),
    # Names that are not ATen's: not bound.
    _make("Sub", "Tensor a", "Tensor b", "Tensor c"),
    "}  // namespace infini::ops",
    "#endif",
])

# Operator<Op, Device::Type, index> for: Abs {cpu: 8}, Sum {cpu: 8},
# Add {cpu: 0, 1}, Gemm {cpu: 0, 2; nvidia: 0}, Clamp {nvidia: 0, 8},
# internal::Softmax {cpu: 8};
# and the generic dispatching Operator<Abs, kCount, 0>, which is no implementation.
STUB_LIBRARY = """
namespace infini::rt {
struct Device { enum class Type { kCpu, kNvidia, kCambricon, kAscend, kMetax, kMoore, kIluvatar, kHygon, kCount }; };
}
namespace infini::ops {
struct Abs; struct Sum; struct Add; struct Gemm; struct Clamp;
namespace internal { struct Softmax; }
template <typename Key, rt::Device::Type device_type, unsigned long index>
struct Operator { Operator(); virtual ~Operator(); void operator()(int) const; };
template <typename Key, rt::Device::Type device_type, unsigned long index>
void Operator<Key, device_type, index>::operator()(int) const {}
template <typename Key, rt::Device::Type device_type, unsigned long index>
Operator<Key, device_type, index>::Operator() {}
template <typename Key, rt::Device::Type device_type, unsigned long index>
Operator<Key, device_type, index>::~Operator() {}
using T = rt::Device::Type;
template struct Operator<Abs, T::kCpu, 8>;
template struct Operator<Abs, T::kCount, 0>;
// Sum's ATen-backed class "lacks" its operator() (abstract): a specialization without it.
template <> struct Operator<Sum, T::kCpu, 8> { Operator(); };
Operator<Sum, T::kCpu, 8>::Operator() {}
template struct Operator<Add, T::kCpu, 0>;
template struct Operator<Add, T::kCpu, 1>;
template struct Operator<Gemm, T::kCpu, 0>;
template struct Operator<Gemm, T::kCpu, 2>;
template struct Operator<Gemm, T::kNvidia, 0>;
template struct Operator<Clamp, T::kNvidia, 0>;
template struct Operator<Clamp, T::kNvidia, 8>;
template struct Operator<internal::Softmax, T::kCpu, 8>;
}
"""


def _install(root: Path, headers: dict[str, str], library: str) -> Path:
    """A stub InfiniOps install under ``root``: ``include/infini/<name>`` for
    each header, and ``lib/libinfiniops.so`` compiled from ``library``."""
    if CXX is None:
        pytest.skip("needs a C++ compiler to make the stub InfiniOps library")
    (root / "include" / "infini").mkdir(parents=True)
    for name, text in headers.items():
        (root / "include" / "infini" / name).write_text(text)
    (root / "lib").mkdir()
    source = root / "library.cpp"
    source.write_text(library)
    subprocess.run([CXX, "-std=c++17", "-shared", "-fPIC", f"-I{root / 'include'}", "-o",
                    str(root / "lib" / "libinfiniops.so"), str(source)],
                   check=True, capture_output=True, timeout=120)
    return root


@pytest.fixture(scope="module")
def stub_install(tmp_path_factory) -> Path:
    """include/infini/operator_call_instantiations.h and lib/libinfiniops.so."""
    return _install(tmp_path_factory.mktemp("stub_infiniops"),
                    {"operator_call_instantiations.h": STUB_HEADER}, STUB_LIBRARY)


@pytest.fixture(scope="module")
def report(stub_install):
    header = (stub_install / "include" / "infini" / "operator_call_instantiations.h").read_text()
    return ib.bind(ib.parse_signatures(header), ib.aten_schemas_from_torch())


def _binding(report, aten):
    found = [b for b in report.bindings if b.aten == aten]
    assert len(found) == 1, f"{aten} bound {len(found)} times: {[b.aten for b in report.bindings]}"
    return found[0]


def test_signatures_are_read_from_the_instantiations(stub_install):
    header = (stub_install / "include" / "infini" / "operator_call_instantiations.h").read_text()
    signatures = ib.parse_signatures(header)
    assert [(p.cpp_type, p.name) for p in signatures["Sum"][0]] == [
        ("Tensor", "input"), ("std::optional<std::vector<int64_t>>", "dim"), ("bool", "keepdim"),
        ("std::optional<DataType>", "dtype"), ("Tensor", "out")]
    assert len(signatures["Add"]) == 2


def test_out_overloads_bind_by_signature(report):
    sum_ = _binding(report, "aten::sum.IntList_out")
    assert sum_.operator == "Sum"
    assert [(p.name, p.kind, p.aten_index, p.output) for p in sum_.params] == [
        ("input", "kTensor", 0, False), ("dim", "kOptionalIntList", 1, False), ("keepdim", "kBool", 2, False),
        ("dtype", "kOptionalDataType", 3, False), ("out", "kTensor", 4, True)]
    add = _binding(report, "aten::add.out")
    # A Scalar becomes a double, checked per call (kScalar), not a plain float.
    assert [p.kind for p in add.params] == ["kTensor", "kTensor", "kScalar", "kTensor"]
    softmax = _binding(report, "aten::_softmax.out")  # ATen's _softmax is InfiniOps' internal::Softmax
    assert softmax.operator == "internal::Softmax" and [p.name for p in softmax.params] == [
        "input", "dim", "half_to_float", "out"]
    clamp = _binding(report, "aten::clamp.out")
    assert [p.kind for p in clamp.params] == ["kTensor", "kOptionalScalar", "kOptionalScalar", "kTensor"]
    assert [p.kind for p in _binding(report, "aten::cat.out").params] == ["kTensorList", "kInt", "kTensor"]


def test_several_outputs_keep_their_order(report):
    max_ = _binding(report, "aten::max.dim_max")
    assert [(p.name, p.output) for p in max_.params][-2:] == [("max", True), ("max_values", True)]


def test_in_place_overloads_are_served_with_out_self(report):
    abs_ = _binding(report, "aten::abs_")
    assert [(p.aten_index, p.output) for p in abs_.params] == [(0, False), (0, True)]
    add_ = _binding(report, "aten::add_.Tensor")
    assert add_.params[-1].aten_index == 0 and add_.params[-1].output
    # max has two outputs: no in-place form
    assert not [b for b in report.bindings if b.aten.startswith("aten::max_")]


def test_operators_generated_from_in_place_schemas(report):
    """InfiniOps makes an in-place-only schema an out= form
    (divide_.Scalar -> Divide(input, other, out)): the in-place overload
    passes self as out, the functional one its allocated result."""
    inplace = _binding(report, "aten::divide_.Scalar")
    assert [(p.name, p.kind, p.aten_index, p.output) for p in inplace.params] == [
        ("input", "kTensor", 0, False), ("other", "kScalar", 1, False), ("out", "kTensor", 0, True)]
    functional = _binding(report, "aten::divide.Scalar")
    assert [(p.aten_index, p.output) for p in functional.params] == [(0, False), (1, False), (2, True)]


def test_functional_overloads_write_the_allocated_results(report):
    # aten::abs(Tensor self): result 0 is argument 1, after the arguments.
    abs_ = _binding(report, "aten::abs")
    assert [(p.aten_index, p.output) for p in abs_.params] == [(0, False), (1, True)]
    max_ = _binding(report, "aten::max.dim")
    assert [(p.name, p.aten_index) for p in max_.params if p.output] == [("max", 3), ("max_values", 4)]


def test_arguments_the_api_leaves_out_must_be_none(report):
    clone = _binding(report, "aten::clone.out")
    assert clone.must_be_none == (1,)  # MemoryFormat? memory_format
    assert [p.name for p in clone.params] == ["input", "out"]


def test_what_is_not_bound_says_why(report):
    assert not [b for b in report.bindings if b.operator in ("Gemm", "Sub", "Bernoulli")]
    assert report.unbound_operators["Gemm"] == "no ATen .out overload of that name"
    assert report.unbound_operators["Sub"] == "no ATen .out overload with its signature"
    schema = next(s for s in ib.aten_schemas_from_torch() if s.qualified == "aten::bernoulli.out")
    assert "random" in ib.expected_signature(schema)


@pytest.mark.parametrize("aten_type,cpp", [
    ("Tensor", "Tensor"), ("Tensor?", "std::optional<Tensor>"), ("Tensor[]", "std::vector<Tensor>"),
    ("Tensor?[]", "std::vector<std::optional<Tensor>>"), ("Scalar", "double"), ("float", "double"),
    ("Scalar?", "std::optional<double>"), ("int", "int64_t"), ("SymInt", "int64_t"),
    ("int[]?", "std::optional<std::vector<int64_t>>"), ("int[1]?", "std::optional<std::vector<int64_t>>"),
    ("SymInt[]", "std::vector<int64_t>"), ("ScalarType?", "std::optional<DataType>"),
    ("str?", "std::optional<std::string>"), ("bool", "bool"), ("Dimname", None), ("Generator?", None),
])
def test_type_rules(aten_type, cpp):
    assert ib.cpp_type_of(aten_type) == cpp


def test_schema_strings_parse():
    s = ib.parse_schema("aten::sum.IntList_out(Tensor self, int[1]? dim, bool keepdim=False, *, "
                        "ScalarType? dtype=None, Tensor(a!) out) -> Tensor(a!)")
    assert s.qualified == "aten::sum.IntList_out" and s.outputs == [4]
    assert [(a.name, a.type, a.kwarg_only, a.written) for a in s.arguments] == [
        ("self", "Tensor", False, False), ("dim", "int[1]?", False, False), ("keepdim", "bool", False, False),
        ("dtype", "ScalarType?", True, False), ("out", "Tensor", True, True)]


def test_implementations_are_read_from_the_library(stub_install):
    impls = ib.implementations_from_symbols((stub_install / "lib" / "libinfiniops.so").read_bytes())
    assert impls == {"Abs": {0: [8]}, "Add": {0: [0, 1]}, "Clamp": {1: [0, 8]},
                     "Gemm": {0: [0, 2], 1: [0]}, "Sum": {0: [8]}, "internal::Softmax": {0: [8]}}


def test_abstract_aten_backed_classes_without_a_call_are_not_used(stub_install, report):
    """An ATen-backed class with fewer operator() than the operator has
    public signatures is abstract: its Make would crash. Sum's defines none
    at all, so there is nothing to complete: index 8 goes."""
    data = (stub_install / "lib" / "libinfiniops.so").read_bytes()
    impls = ib.implementations_from_symbols(data)
    header = (stub_install / "include" / "infini" / "operator_call_instantiations.h").read_text()
    completions, dropped = ib.complete_abstract_aten_backed(data, impls, ib.parse_signatures(header))
    assert (completions, dropped) == ([], ["Sum"])
    assert impls["Sum"] == {0: []} and impls["Abs"] == {0: [8]}


def test_generated_table_names_the_make_signature_and_implementations(stub_install, report):
    impls = ib.implementations_from_symbols((stub_install / "lib" / "libinfiniops.so").read_bytes())
    text = "".join(ib.render_cpp(report, impls, i, 3) for i in range(3))
    assert ("make_binding<::infini::ops::Sum, NotCompleted, Tensor, std::optional<std::vector<int64_t>>, bool, "
            "std::optional<DataType>, Tensor>(\n      \"aten::sum.IntList_out\"") in text
    assert '"aten::add.out", "Add", {{ArgKind::kTensor, 0, false}, {ArgKind::kTensor, 1, false}, ' \
           '{ArgKind::kScalar, 2, false}, {ArgKind::kTensor, 3, true}}, {}, {{0, 0}, {0, 1}}' in text
    index = ib.render_index(3, impls)
    assert "add_generated_bindings_2" in index
    assert '{"Gemm", {{0, 0}, {0, 2}, {1, 0}}},' in index
    assert 'make_binding<::infini::ops::internal::Softmax, NotCompleted, Tensor, int64_t, bool, Tensor>(' in text


def test_torch_allowlist_is_what_binds(report):
    names = ib.torch_allowlist(report)
    assert {"abs", "sum", "add", "max", "clamp", "cat", "clone"} <= set(names)
    assert "gemm" not in names and "bernoulli" not in names


CHOICE_PROGRAM = """
#include <cstdio>
#include "runtime/infini/implementation_choice.h"
using namespace torch_infini::runtime;
using namespace torch_infini::runtime::infini;
int main() {
  const std::vector<Implementation> abs = {%(Abs)s}, add = {%(Add)s}, gemm = {%(Gemm)s}, clamp = {%(Clamp)s};
  auto yes = [] { return true; };
  auto no = [] { return false; };
  const auto any = ImplementationKind::kUnknown, aten = ImplementationKind::kAtenBacked,
             native = ImplementationKind::kNative;
  int asked = 0;  // which limits a choice asked about: 1 native, 2 ATen-backed
  auto native_asked = [&] { asked |= 1; return true; };
  auto aten_asked = [&] { asked |= 2; return true; };
  std::printf("%%d %%d %%d %%d %%d %%d %%d %%d\\n",
              choose_implementation(abs, 0, true, any, yes, yes),     // ATen-backed only
              choose_implementation(abs, 1, true, any, yes, yes),     // none on nvidia
              choose_implementation(add, 0, true, any, yes, yes),     // native 0
              choose_implementation(add, 0, true, any, no, yes),      // native refuses, no index 8
              choose_implementation(gemm, 1, true, any, yes, yes),    // native on nvidia
              choose_implementation(clamp, 1, true, any, no, yes),    // native refuses: ATen-backed
              choose_implementation(clamp, 1, false, any, yes, yes),  // a hand entry owns native
              choose_implementation(clamp, 1, true, any, no, no));    // nothing fits
  std::printf("%%d %%d %%d %%d %%d\\n",
              choose_implementation(clamp, 1, true, aten, yes, yes),  // measured faster: ATen-backed
              choose_implementation(clamp, 1, true, aten, yes, no),   // ATen-backed refuses: native
              choose_implementation(clamp, 1, true, native, yes, yes),
              choose_implementation(add, 0, true, aten, yes, yes),    // no index 8: native
              choose_implementation(abs, 1, true, aten, yes, yes));   // nothing on nvidia
  choose_implementation(clamp, 1, true, aten, native_asked, aten_asked);
  std::printf("%%d\\n", asked);  // the native limits are not asked once ATen-backed fits
}
"""


def _compile_and_run(tmp_path, source_text: str, *extra_sources: Path) -> list[str]:
    source = tmp_path / "program.cpp"
    source.write_text(source_text)
    program = tmp_path / "program"
    subprocess.run([CXX, "-std=c++17", f"-I{REPO / 'csrc'}", str(source), *map(str, extra_sources),
                    "-o", str(program), "-pthread"], check=True, capture_output=True, timeout=120)
    return subprocess.run([str(program)], check=True, capture_output=True, text=True).stdout.split()


def test_implementation_choice_on_the_stub(stub_install, tmp_path):
    impls = ib.implementations_from_symbols((stub_install / "lib" / "libinfiniops.so").read_bytes())
    lists = {op: ", ".join(f"{{{d}, {i}}}" for d, ix in devs.items() for i in ix) for op, devs in impls.items()}
    out = _compile_and_run(tmp_path, CHOICE_PROGRAM % lists)
    assert out == ["8", "-1", "0", "-1", "0", "8", "8", "-1",
                   "8", "0", "0", "0", "-1",
                   "2"]


PREFERENCES_PROGRAM = """
#include <cstdio>
#include "runtime/implementation_preferences.h"
using namespace torch_infini::runtime;
int main() {
  const auto N = ImplementationKind::kNative, A = ImplementationKind::kAtenBacked;
  // Rows in any order: "any size" last, the smallest class first.
  set_implementation_preferences({{"cpu", "Mul", -1, A}, {"cpu", "Mul", 1024, N}, {"cpu", "*", -1, A},
                                  {"nvidia", "Mul", -1, N}, {"cpu", "Gemm", 4096, N}, {"cpu", "Gemm", 65536, A}});
  const BackendPreferences& cpu = preferences_for("cpu");
  std::printf("%d %d %d %d %d %d ", int(cpu.faster("Mul", 1)), int(cpu.faster("Mul", 1024)),
              int(cpu.faster("Relu", 1)), int(cpu.faster("Gemm", 4095)), int(cpu.faster("Gemm", 4096)),
              int(cpu.faster("Gemm", 65536)));
  std::printf("%d %d ", int(preferences_for("nvidia").faster("Mul", 1)),
              int(preferences_for("nvidia").faster("Relu", 1)));
  // A native answer limited to float32 (c10::ScalarType 6): float16 (5) and
  // an unknown dtype take the backend's answer.
  set_implementation_preferences({{"cpu", "Relu", 256, N, uint64_t{1} << 6}, {"cpu", "*", -1, A}});
  std::printf("%d %d %d ", int(preferences_for("cpu").faster("Relu", 1, 6)),
              int(preferences_for("cpu").faster("Relu", 1, 5)), int(preferences_for("cpu").faster("Relu", 1)));
  // A call not in the measured form (a broadcast input): the operator's
  // answer for any size, else the backend's.
  set_implementation_preferences({{"cpu", "Mul", 1024, N}, {"cpu", "Mul", -1, A}, {"cpu", "Relu", 256, N},
                                  {"cpu", "*", -1, A}});
  std::printf("%d %d %d ", int(preferences_for("cpu").faster("Mul", 1, 6, false)),
              int(preferences_for("cpu").faster("Relu", 1, 6, false)),
              int(preferences_for("cpu").faster("Mul", 1, 6, true)));
  set_implementation_preferences({});  // a thread's copy follows a change
  std::printf("%d %zu\\n", int(preferences_for("cpu").faster("Mul", 1)), implementation_preferences().size());
}
"""


def test_implementation_preferences_by_size_class(tmp_path):
    """Which kind was measured faster: per backend and operator, the first
    size class holding the output's element count (where it names dtypes,
    for an output of one of them; for a call in the measured form only),
    else the backend's "*" row, else unknown (0; native 1, ATen-backed 2)."""
    out = _compile_and_run(tmp_path, PREFERENCES_PROGRAM, REPO / "csrc" / "runtime" / "implementation_preferences.cpp")
    assert out == ["1", "2", "2", "1", "2", "2", "1", "0", "1", "2", "2", "2", "2", "1", "0", "0"]


def test_with_torch_allowlist_comes_from_the_operator_headers(tmp_path):
    base = tmp_path / "include" / "base"
    base.mkdir(parents=True)
    for name in ("abs", "sum", "internal_softmax", "gemm", "bernoulli"):
        (base / f"{name}.h").write_text("  Tensor::Shape input_shape_;\n")
    # A hand-written base keeping other metadata: InfiniOps' generated
    # ATen-backed implementation does not compile against it (Convolution).
    (base / "convolution.h").write_text("  conv_detail::Metadata metadata_;\n")
    out = subprocess.run([sys.executable, str(REPO / "tools" / "infiniops_binding.py"), "--torch-allowlist",
                          str(tmp_path)], check=True, capture_output=True, text=True).stdout.strip()
    # gemm has no ATen operator; bernoulli draws random numbers (the host does).
    assert out.split(",") == ["_softmax", "abs", "sum"]


# An InfiniOps whose ATen-backed Sub is abstract, as at 1f6f9c2: the base has
# a deprecated in-place overload that the generator skipped. Its headers are
# the shapes the completion needs (Operator, Device, Tensor, Sub); its
# library defines Operator<Sub, kCpu, 8>::operator() for the out= overload
# only, and writes `input - alpha * other`. A constructor without alpha has a
# non-virtual operator() beside it.
ABSTRACT_OPS_HEADER = """
#pragma once
namespace infini::rt { struct Device { enum class Type { kCpu, kNvidia, kCount }; }; }
namespace infini::ops {
using Device = rt::Device;
struct Tensor { double* data; };
struct Config {};
class OperatorBase {
 public:
  virtual ~OperatorBase() = default;
  void set_config(const Config&) { configured_ = true; }
  bool configured_ = false;
};
template <typename Key, Device::Type device_type = Device::Type::kCount, unsigned long index = 0>
class Operator : public OperatorBase {};
class Sub : public Operator<Sub> {
 public:
  Sub(const Tensor input, const Tensor other, const double alpha, Tensor out) : alpha_{alpha} {}
  Sub(const Tensor input, const Tensor other, Tensor out) : alpha_{1} {}
  [[deprecated]] Sub(Tensor input, const Tensor other, const double alpha) : alpha_{alpha} {}
  virtual void operator()(const Tensor input, const Tensor other, const double alpha, Tensor out) const = 0;
  [[deprecated]] virtual void operator()(Tensor input, const Tensor other, const double alpha) const = 0;
  // A public signature that is no virtual one (as Add's at 1f6f9c2).
  void operator()(const Tensor input, const Tensor other, Tensor out) const { (*this)(input, other, 1.0, out); }
 protected:
  double alpha_{};
};
}
"""

ABSTRACT_OPS_LIBRARY = """
#include <infini/ops.h>
namespace infini::ops {
template <Device::Type kDev>
class Operator<Sub, kDev, 8> : public Sub {
 public:
  using Sub::Sub;
  void operator()(const Tensor input, const Tensor other, const double alpha, Tensor out) const override;
};
template <Device::Type kDev>
void Operator<Sub, kDev, 8>::operator()(const Tensor input, const Tensor other, const double alpha,
                                        Tensor out) const {
  *out.data = *input.data - alpha * *other.data;
}
template void Operator<Sub, Device::Type::kCpu, 8>::operator()(const Tensor, const Tensor, const double,
                                                                Tensor) const;
}
"""

COMPLETION_PROGRAM = """
#include <cstdio>
#include <stdexcept>
#include "infini_completions.h"
namespace torch_infini::runtime::infini {
void refuse_skipped_overload(const char* op) { throw std::runtime_error(op); }
}
using namespace infini::ops;
int main() {
  double a = 5, b = 2, out = 0;
  Tensor ta{&a}, tb{&b}, to{&out};
  auto op = torch_infini::runtime::infini::completed::Sub::make(0, ta, tb, 1.5, to);
  auto none = torch_infini::runtime::infini::completed::Sub::make(1, ta, tb, 1.5, to);  // no nvidia class
  static_cast<const Sub&>(*op)(ta, tb, 1.5, to);
  std::printf("%g %d\\n", out, none == nullptr);
}
"""


@pytest.fixture(scope="module")
def abstract_install(tmp_path_factory) -> Path:
    instantiations = "\n".join([
        "namespace infini::ops {",
        _make("Sub", "Tensor input", "Tensor other", "double alpha", "Tensor out"),
        _make("Sub", "Tensor input", "Tensor other", "double alpha"),
        _make("Sub", "Tensor input", "Tensor other", "Tensor out"),
        "}"])
    return _install(tmp_path_factory.mktemp("abstract_infiniops"),
                    {"ops.h": ABSTRACT_OPS_HEADER, "operator_call_instantiations.h": instantiations},
                    ABSTRACT_OPS_LIBRARY)


def test_abstract_aten_backed_classes_are_completed(abstract_install, tmp_path):
    """Sub's ATen-backed class defines one of its two overloads: the build
    reads which from the library's symbols, binds sub.out to it, and
    completes the class; made through the completion, the call runs the
    library's code. The skipped overload binds nothing ATen-backed."""
    data = (abstract_install / "lib" / "libinfiniops.so").read_bytes()
    impls = ib.implementations_from_symbols(data)
    assert impls == {"Sub": {0: [8]}}
    signatures = ib.parse_signatures(
        (abstract_install / "include" / "infini" / "operator_call_instantiations.h").read_text())
    completions, dropped = ib.complete_abstract_aten_backed(data, impls, signatures)
    assert dropped == [] and impls == {"Sub": {0: [8]}}
    (sub,) = completions
    assert (sub.operator, sub.devices) == ("Sub", (0,))
    assert [[p.name for p in sig] for sig in sub.defined] == [["input", "other", "alpha", "out"]]
    assert [[p.name for p in sig] for sig in sub.skipped] == [["input", "other", "alpha"], ["input", "other", "out"]]
    assert sub.skips(["Tensor", "Tensor", "double"]) and not sub.skips(["Tensor", "Tensor", "double", "Tensor"])

    report = ib.bind(signatures, ib.aten_schemas_from_torch())
    table = ib.render_cpp(report, impls, 0, 1, completions)
    assert ('make_binding<::infini::ops::Sub, completed::Sub, Tensor, Tensor, double, Tensor>(\n'
            '      "aten::sub.out", "Sub"') in table
    assert "{{0, 8}}));" in table.split('"aten::sub.out"')[1].split("\n")[0]
    assert '"Sub", {}' in ib.render_index(1, impls, completions)  # hand entries cannot make it

    (tmp_path / "infini_completions.h").write_text(ib.render_completions(completions))
    (tmp_path / "main.cpp").write_text(COMPLETION_PROGRAM)
    program = tmp_path / "main"
    subprocess.run([CXX, "-std=c++17", f"-I{REPO / 'csrc'}", f"-I{abstract_install / 'include'}",
                    f"-I{tmp_path}", str(tmp_path / "main.cpp"), f"-L{abstract_install / 'lib'}", "-linfiniops",
                    f"-Wl,-rpath,{abstract_install / 'lib'}", "-o", str(program)],
                   check=True, capture_output=True, text=True, timeout=120)
    # The stub library, not an Infini stack's libinfiniops that LD_LIBRARY_PATH may name.
    env = {**os.environ, "LD_LIBRARY_PATH": str(abstract_install / "lib")}
    ran = subprocess.run([str(program)], check=True, capture_output=True, text=True, env=env)
    assert ran.stdout.split() == ["2", "1"]


def test_demangled_types_match_the_instantiation_list():
    """Parameter types read back from symbols spell as InfiniOps' list does."""
    for demangled, listed in [
            ("std::optional<std::vector<long, std::allocator<long> > >", "std::optional<std::vector<int64_t>>"),
            ("std::vector<std::optional<infini::ops::Tensor>, std::allocator<std::optional<infini::ops::Tensor> > >",
             "std::vector<std::optional<Tensor>>"),
            ("std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string"),
            ("std::optional<infini::rt::DataType>", "std::optional<DataType>"),
            ("infini::ops::Tensor", "const Tensor"),
            ("infini::rt::TensorView", "Tensor")]:  # InfiniOps' Tensor since InfiniRT a38977e
        assert ib.canonical_type(demangled) == ib.canonical_type(listed), demangled
    assert ib.demangle(b"_ZNK6infini3ops8OperatorINS0_3SubELNS_2rt6Device4TypeE0ELm8EEclENS0_6TensorES7_dS7_") == (
        "infini::ops::Operator<infini::ops::Sub, (infini::rt::Device::Type)0, 8ul>::operator()"
        "(infini::ops::Tensor, infini::ops::Tensor, double, infini::ops::Tensor) const")
