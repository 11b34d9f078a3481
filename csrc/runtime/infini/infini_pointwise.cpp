// mul on infini::ops::Mul; relu and silu on infini::ops::Relu and
// infini::ops::Silu (InfiniOps 1f6f9c2 and newer).
//
// What they cannot do, refused up front (InfiniOps asserts on it):
// - Mul needs one dtype for both inputs and the output (no type promotion),
//   inputs broadcast as same-rank stride-0 views (it walks each input with
//   the output's rank), and an output without stride-0 dimensions;
// - Relu and Silu need the input's shape and dtype for the output;
// - InfiniOps reads device memory only: a CPU scalar operand of Mul is
//   served from a cached one-element device copy when PyTorch's kernel would
//   see exactly that value (it reads CPU scalars in the compute type: float32
//   for float16), and refused otherwise.
// float16/bfloat16 are computed in float32 and rounded back, float16 toward
// zero: results are within 1 ulp of PyTorch's.

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "runtime/infini/infini_aten.h"
#include "runtime/infini/infini_common.h"
#include "runtime/infini/device_scalars.h"
#include "runtime/infini/operator_cache.h"

namespace torch_infini::runtime::infini {
namespace {

// The in-place overloads write their first argument; the others their last
// (out=) or results_into (functional overloads without an out= twin).
at::Tensor output_of(const AtenCall& call) {
  if (!call.results_into.empty()) {
    return call.results_into[0];
  }
  const std::string name = overload_name(call);
  const std::string base = name.substr(0, name.find('.'));
  if (!base.empty() && base.back() == '_') {
    return tensor_at(call, 0);
  }
  return tensor_at(call, call.args.size() - 1);
}

std::string cpu_scalar_reason(const std::string& kernel) {
  return kernel + " reads operands from device memory only, and a CPU "
         "scalar operand would first need a copy to the device";
}

// Shared checks of an elementwise output against one of its inputs.
std::string check_output(const std::string& kernel, const TensorArg& out,
                         const TensorArg& input) {
  if (has_broadcast_dim(out)) {
    return kernel + " cannot write an output with stride-0 (expanded) "
           "dimensions";
  }
  if (may_overlap(out, input) && !same_layout(out, input)) {
    return kernel + " cannot write an output that overlaps an input in "
           "another layout";
  }
  return {};
}

template <typename Op>
class PointwiseLauncher {
 public:
  using Operator = iops::Operator<Op>;

  template <typename Make, typename... Tensors>
  void launch(InfiniProvider& provider, int device, StreamHandle stream,
              Make make, const Tensors&... args) {
    provider.bind(device);
    const irt::Device where(provider.device_type(), device);
    const TensorArg* all[] = {&args...};
    const TensorArg& out = *all[sizeof...(args) - 1];
    const SerialOpenMPScope serial(serial_launch(provider, out));
    OperatorKey key;
    key.words.push_back(device);
    key.words.push_back(static_cast<int64_t>(out.dtype));
    (append_layout(key, args), ...);
    thread_local OperatorCache<Operator> cache;
    Operator& op = cache.get(std::move(key), [&] {
      return make(iops::Config(), view_of(args, where)...);
    });
    op.set_stream(stream);
    static_cast<const Op&>(op)(view_of(args, where)...);
  }
};

// ---------------------------------------------------------------- Mul

#ifdef TORCH_INFINI_OPS_MUL_DEVICE_MASK
using MulOperator = iops::Operator<iops::Mul>;
using MulMake = std::unique_ptr<MulOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const iops::Tensor&);
MulMake volatile mul_make =
    &MulOperator::Make<const iops::Tensor&, const iops::Tensor&>;

struct MulCall {
  TensorArg self, other, out;  // inputs broadcast to out's shape
  c10::DataPtr scalars[2];     // uncached device copies of CPU scalars
};

// `scalars` (for run): where to put CPU scalar operands on the device; the
// check passes none and only sees whether they can be served.
std::string mul_call_of(const AtenCall& call, MulCall* mul,
                        InfiniProvider* provider = nullptr, int device = 0,
                        StreamHandle stream = nullptr) {
  const at::Tensor& self = tensor_at(call, 0);
  const at::Tensor& other = tensor_at(call, 1);
  const at::Tensor out = output_of(call);
  mul->out = arg_of(out);
  for (int i = 0; i < 2; ++i) {
    const at::Tensor* from = i == 0 ? &self : &other;
    TensorArg* to = i == 0 ? &mul->self : &mul->other;
    if (!from->defined()) {
      return "an operand is missing";
    }
    TensorArg arg;
    if (from->device().is_cpu()) {
      if (!scalar_exact(*from, mul->out.dtype)) {
        return "infini::ops::Mul reads its operands as the output's dtype " +
            dtype_name(mul->out.dtype) + ", and the CPU scalar operand " +
            "is not exactly representable in it (PyTorch computes with it "
            "in float32)";
      }
      arg.dtype = mul->out.dtype;
      arg.data = provider == nullptr
          ? nullptr
          : DeviceScalars::instance().get(*provider, device, stream, *from,
                                          mul->out.dtype, &mul->scalars[i]);
    } else {
      arg = arg_of(*from);
    }
    if (!broadcasts_to(arg, out.sizes())) {
      return "an input does not broadcast to the output";
    }
    *to = expanded(arg, out.sizes());
  }
  return {};
}

std::string mul_unsupported(const AtenCall& call) {
  MulCall mul;
  std::string reason = mul_call_of(call, &mul);
  if (!reason.empty()) {
    return reason;
  }
  const c10::ScalarType dtype = mul.out.dtype;
  if (mul.self.dtype != dtype || mul.other.dtype != dtype) {
    return "infini::ops::Mul needs one dtype for both inputs and the output "
           "(no type promotion), but got " + dtype_name(mul.self.dtype) +
        " * " + dtype_name(mul.other.dtype) + " -> " + dtype_name(dtype);
  }
  irt::DataType unused;
  if (!to_infini_dtype(dtype, &unused)) {
    return "infini::ops::Mul has no " + dtype_name(dtype) + " kernel";
  }
  for (const TensorArg* input : {&mul.self, &mul.other}) {
    reason = check_output("infini::ops::Mul", mul.out, *input);
    if (!reason.empty()) {
      return reason;
    }
  }
  return {};
}

void mul_run(InfiniProvider& provider, int device, StreamHandle stream,
             const AtenCall& call) {
  MulCall mul;
  mul_call_of(call, &mul, &provider, device, stream);
  PointwiseLauncher<iops::Mul>().launch(provider, device, stream, mul_make,
                                        mul.self, mul.other, mul.out);
}
#endif

// ------------------------------------------------------- Relu and Silu

// A unary activation: `input` and `out` of one shape and dtype. (Unused
// where this InfiniOps build has neither Relu nor Silu.)
[[maybe_unused]] std::string unary_call_of(const AtenCall& call, const std::string& kernel,
                          TensorArg* input, TensorArg* out) {
  const at::Tensor& self = tensor_at(call, 0);
  if (!self.defined() || self.device().is_cpu()) {
    return cpu_scalar_reason(kernel);
  }
  *input = arg_of(self);
  *out = arg_of(output_of(call));
  if (input->sizes != out->sizes || input->dtype != out->dtype) {
    return kernel + " needs an output of the input's shape and dtype";
  }
  return {};
}

#ifdef TORCH_INFINI_OPS_RELU_DEVICE_MASK
using ReluOperator = iops::Operator<iops::Relu>;
using ReluMake = std::unique_ptr<ReluOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&);
ReluMake volatile relu_make = &ReluOperator::Make<const iops::Tensor&>;

std::string relu_unsupported(const AtenCall& call) {
  TensorArg input, out;
  std::string reason = unary_call_of(call, "infini::ops::Relu", &input, &out);
  if (!reason.empty()) {
    return reason;
  }
  irt::DataType unused;
  if (!to_infini_dtype(out.dtype, &unused)) {
    return "infini::ops::Relu has no " + dtype_name(out.dtype) + " kernel";
  }
  // Relu copies an overlapping input first, so in place is fine.
  if (has_broadcast_dim(out)) {
    return "infini::ops::Relu cannot write an output with stride-0 "
           "(expanded) dimensions";
  }
  return {};
}

void relu_run(InfiniProvider& provider, int device, StreamHandle stream,
              const AtenCall& call) {
  TensorArg input, out;
  unary_call_of(call, "infini::ops::Relu", &input, &out);
  PointwiseLauncher<iops::Relu>().launch(provider, device, stream, relu_make,
                                         input, out);
}
#endif

#ifdef TORCH_INFINI_OPS_SILU_DEVICE_MASK
using SiluOperator = iops::Operator<iops::Silu>;
using SiluMake = std::unique_ptr<SiluOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&);
SiluMake volatile silu_make = &SiluOperator::Make<const iops::Tensor&>;

std::string silu_unsupported(const AtenCall& call) {
  TensorArg input, out;
  std::string reason = unary_call_of(call, "infini::ops::Silu", &input, &out);
  if (!reason.empty()) {
    return reason;
  }
  const c10::ScalarType t = out.dtype;
  if (t != c10::ScalarType::Float && t != c10::ScalarType::Half &&
      t != c10::ScalarType::BFloat16 && t != c10::ScalarType::Double) {
    return "infini::ops::Silu has no " + dtype_name(t) +
        " kernel (floating types only)";
  }
  return check_output("infini::ops::Silu", out, input);
}

void silu_run(InfiniProvider& provider, int device, StreamHandle stream,
              const AtenCall& call) {
  TensorArg input, out;
  unary_call_of(call, "infini::ops::Silu", &input, &out);
  PointwiseLauncher<iops::Silu>().launch(provider, device, stream, silu_make,
                                         input, out);
}
#endif

using Unsupported = std::string (*)(const AtenCall&);
using Run = void (*)(InfiniProvider&, int, StreamHandle, const AtenCall&);

// A server for `overloads` on InfiniOps' `kernel`, present in the build when
// `unsupported` is, and on this backend when `mask` has its bit.
AtenServer server(InfiniProvider& provider, std::vector<OpSupport>& support,
                  std::vector<std::string> overloads, const std::string& kernel,
                  unsigned long mask, Unsupported unsupported, Run run,
                  OpSupport row) {
  if (unsupported != nullptr &&
      has_implementation(provider.device_type(), mask)) {
    support.push_back(std::move(row));
    InfiniProvider* p = &provider;
    return AtenServer{
        std::move(overloads), unsupported,
        [p, run](int device, StreamHandle stream, const AtenCall& call) {
          run(*p, device, stream, call);
        }};
  }
  return refused(std::move(overloads), kernel, provider.backend());
}

OpSupport row(std::string op, std::vector<c10::ScalarType> dtypes,
              bool broadcast, std::string kernel) {
  OpSupport r;
  r.op = std::move(op);
  r.dtypes = std::move(dtypes);
  r.broadcast = broadcast;
  r.strided = true;
  r.kernel = std::move(kernel);
  return r;
}

}  // namespace

std::vector<AtenServer> pointwise_servers(InfiniProvider& provider,
                                          std::vector<OpSupport>& support) {
#ifdef TORCH_INFINI_OPS_MUL_DEVICE_MASK
  const unsigned long mul_mask = TORCH_INFINI_OPS_MUL_DEVICE_MASK;
  const Unsupported mul_check = &mul_unsupported;
  const Run mul_go = &mul_run;
#else
  const unsigned long mul_mask = 0;
  const Unsupported mul_check = nullptr;
  const Run mul_go = nullptr;
#endif
#ifdef TORCH_INFINI_OPS_RELU_DEVICE_MASK
  const unsigned long relu_mask = TORCH_INFINI_OPS_RELU_DEVICE_MASK;
  const Unsupported relu_check = &relu_unsupported;
  const Run relu_go = &relu_run;
#else
  const unsigned long relu_mask = 0;
  const Unsupported relu_check = nullptr;
  const Run relu_go = nullptr;
#endif
#ifdef TORCH_INFINI_OPS_SILU_DEVICE_MASK
  const unsigned long silu_mask = TORCH_INFINI_OPS_SILU_DEVICE_MASK;
  const Unsupported silu_check = &silu_unsupported;
  const Run silu_go = &silu_run;
#else
  const unsigned long silu_mask = 0;
  const Unsupported silu_check = nullptr;
  const Run silu_go = nullptr;
#endif
  std::vector<c10::ScalarType> relu_dtypes = floating_dtypes();
  for (auto t : {c10::ScalarType::Char, c10::ScalarType::Short, c10::ScalarType::Int,
                 c10::ScalarType::Long, c10::ScalarType::Byte}) {
    relu_dtypes.push_back(t);
  }
  std::vector<AtenServer> servers;
  servers.push_back(server(
      provider, support, {"aten::mul.out", "aten::mul_.Tensor"},
      "infini::ops::Mul", mul_mask, mul_check, mul_go,
      row("aten::mul.Tensor", numeric_dtypes(/*with_bool=*/false), true,
          "infini::ops::Mul (also mul_ and mul.out; one dtype for inputs "
          "and output; CPU scalars exact in it)")));
  servers.push_back(server(
      provider, support, {"aten::relu", "aten::relu_"}, "infini::ops::Relu",
      relu_mask, relu_check, relu_go,
      row("aten::relu", relu_dtypes, false,
          "infini::ops::Relu (also relu_)")));
  servers.push_back(server(
      provider, support, {"aten::silu.out", "aten::silu_"},
      "infini::ops::Silu", silu_mask, silu_check, silu_go,
      row("aten::silu", floating_dtypes(), false,
          "infini::ops::Silu (also silu_ and silu.out)")));
  return servers;
}

}  // namespace torch_infini::runtime::infini
