// The limits of InfiniOps' native kernels, per operator: what a call bound
// to it (infini_binding.h) must satisfy for the native implementation to run
// it exactly as PyTorch would. InfiniOps asserts (aborts) on the rest; the
// generic server then uses the ATen-backed implementation where the build
// has one, or refuses.
//
// - Add: as Mul, and alpha 1 or -1 for floating types (with another alpha it
//   rounds alpha * b before adding, where ATen's kernel rounds once).
// - Mul: one dtype for both inputs and the output (no type promotion);
//   inputs are passed broadcast as same-rank stride-0 views (it walks each
//   input with the output's rank); an output without stride-0 dimensions
//   that overlaps no input in another layout.
// - Relu and Silu: an output of the input's shape and dtype; Silu floating
//   types only, and no overlap in another layout (Relu copies an overlapping
//   input first, so in place is fine).
// float16/bfloat16 are computed in float32 and rounded back, float16 toward
// zero: results are within 1 ulp of PyTorch's.

#include <string>
#include <utility>

#include <c10/util/SmallVector.h>

#include "runtime/infini/add_alpha.h"
#include "runtime/infini/infini_binding.h"

namespace torch_infini::runtime::infini {
namespace {

// Built per call: a small vector keeps the usual two inputs off the heap.
struct Operands {
  c10::SmallVector<TensorArg, 2> inputs;
  TensorArg out;
  bool cpu_scalar = false;
};

Operands operands_of(const Binding& b, const AtenCall& call) {
  Operands o;
  for (const auto& c : b.conversions) {
    const c10::IValue& v = call.args[c.aten_index];
    if (!v.isTensor() || !v.toTensor().defined()) {
      continue;
    }
    const at::Tensor& t = v.toTensor();
    if (c.output) {
      o.out = arg_of(t);
    } else if (t.device().is_cpu()) {
      o.cpu_scalar = true;  // read as the output's dtype (checked exact)
      TensorArg scalar;
      scalar.dtype = call.args[b.conversions.back().aten_index].toTensor().scalar_type();
      o.inputs.push_back(scalar);
    } else {
      o.inputs.push_back(arg_of(t));
    }
  }
  return o;
}

std::string output_reason(const char* kernel, const Operands& o,
                          bool overlap_ok) {
  if (has_broadcast_dim(o.out)) {
    return std::string(kernel) +
        " cannot write an output with stride-0 (expanded) dimensions";
  }
  for (const auto& in : o.inputs) {
    if (!overlap_ok && in.data != nullptr && may_overlap(o.out, in) &&
        !same_layout(o.out, in)) {
      return std::string(kernel) +
          " cannot write an output that overlaps an input in another layout";
    }
  }
  return {};
}

// An elementwise binary kernel's: one dtype, inputs broadcasting to the
// output, an output overlapping no input in another layout.
std::string binary_limits(const char* kernel, const Binding& b,
                          const AtenCall& call) {
  const Operands o = operands_of(b, call);
  for (const auto& in : o.inputs) {
    if (in.dtype != o.out.dtype) {
      return std::string(kernel) +
          " needs one dtype for both inputs and the output (no type "
          "promotion), but got " + dtype_name(o.inputs[0].dtype) +
          ", " + dtype_name(o.inputs.back().dtype) + " -> " +
          dtype_name(o.out.dtype);
    }
    if (in.data != nullptr && !broadcasts_to(in, o.out.sizes)) {
      return std::string(kernel) +
          ": an input does not broadcast to the output";
    }
  }
  return output_reason(kernel, o, /*overlap_ok=*/false);
}

std::string mul_limits(const Binding& b, const AtenCall& call) {
  return binary_limits("infini::ops::Mul", b, call);
}

std::string add_limits(const Binding& b, const AtenCall& call) {
  for (const auto& c : b.conversions) {
    const c10::IValue& v = call.args[c.aten_index];
    if (c.kind == ArgKind::kScalar && v.isScalar() &&
        !add_alpha_is_exact(v.toScalar(),
                            call.args[b.conversions.back().aten_index]
                                .toTensor()
                                .scalar_type())) {
      return "infini::ops::Add (native) computes a + alpha * b with two "
             "roundings where ATen's add rounds once";
    }
  }
  return binary_limits("infini::ops::Add", b, call);
}

std::string unary_limits(const char* kernel, const Binding& b,
                         const AtenCall& call, bool floating_only,
                         bool overlap_ok) {
  const Operands o = operands_of(b, call);
  if (o.cpu_scalar || o.inputs.size() != 1) {
    return std::string(kernel) + " reads its input from device memory only";
  }
  const TensorArg& in = o.inputs[0];
  if (in.sizes != o.out.sizes || in.dtype != o.out.dtype) {
    return std::string(kernel) +
        " needs an output of the input's shape and dtype";
  }
  if (floating_only && !c10::isFloatingType(in.dtype)) {
    return std::string(kernel) + " has no " + dtype_name(in.dtype) +
        " kernel (floating types only)";
  }
  return output_reason(kernel, o, overlap_ok);
}

std::string relu_limits(const Binding& b, const AtenCall& call) {
  return unary_limits("infini::ops::Relu", b, call, false, true);
}

std::string silu_limits(const Binding& b, const AtenCall& call) {
  return unary_limits("infini::ops::Silu", b, call, true, false);
}

}  // namespace

const NativeLimits* native_limits(const std::string& op) {
  // Asked a few times per call: four names, compared, beat a hash.
  static const std::pair<const char*, NativeLimits> table[] = {
      {"Add", {&add_limits, /*broadcast_inputs=*/true}},
      {"Mul", {&mul_limits, /*broadcast_inputs=*/true}},
      {"Relu", {&relu_limits, false}},
      {"Silu", {&silu_limits, false}},
  };
  for (const auto& [name, limits] : table) {
    if (op == name) {
      return &limits;
    }
  }
  return nullptr;
}

}  // namespace torch_infini::runtime::infini
