// mm, addmm, bmm, baddbmm and addmv on infini::ops::Gemm.
//
// Two Gemm APIs exist (told apart at build time, tools/build_config.py):
// - accumulating (InfiniOps 2962714): c = alpha * a @ b + beta * c, beta
//   defaulting to 1, so beta is always passed explicitly; a bias is first
//   copied into the output (infini::ops::Cast of one dtype is a copy);
// - optional C (InfiniOps 1f6f9c2, TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C):
//   y = alpha * a @ b, beta ignored and a C input asserted against; a bias is
//   added afterwards with infini::ops::Add (out = y + beta * bias), one more
//   rounding than CPU's fused update (within 1 ulp in float16).
// Both read any strides (transposition through strides), batch over
// dimension -3 only, and accumulate in float32: float64 is refused (its
// results would carry float32 error), integers have no kernel.

#include <ATen/core/Tensor.h>
#include <ATen/record_function.h>
#include <c10/core/Allocator.h>

#include <string>
#include <vector>

#include "runtime/infini/infini_aten.h"
#include "runtime/infini/infini_binding.h"
#include "runtime/infini/infini_common.h"
#include "runtime/infini/operator_cache.h"
#include "runtime/infini/profiler_guard.h"

namespace torch_infini::runtime::infini {
namespace {

#ifdef TORCH_INFINI_OPS_GEMM_DEVICE_MASK

using GemmOperator = iops::Operator<iops::Gemm>;
using OptFloat = std::optional<float>;
using OptInt = std::optional<int>;
#ifdef TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C
using OptTensor = std::optional<iops::Tensor>;
using GemmMake = std::unique_ptr<GemmOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const OptTensor&, const OptFloat&, const OptFloat&, const OptInt&,
    const OptInt&, const iops::Tensor&);
GemmMake volatile gemm_make =
    &GemmOperator::Make<const iops::Tensor&, const OptTensor&, const OptFloat&,
                        const OptFloat&, const OptInt&, const OptInt&,
                        const iops::Tensor&>;
constexpr const char* kGemmApi =
    "infini::ops::Gemm of this InfiniOps build (y = alpha * a @ b, no beta: "
    "InfiniOps 1f6f9c2 API)";
#else
using GemmMake = std::unique_ptr<GemmOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const OptFloat&, const OptFloat&, const OptInt&, const OptInt&,
    const iops::Tensor&);
GemmMake volatile gemm_make =
    &GemmOperator::Make<const iops::Tensor&, const OptFloat&, const OptFloat&,
                        const OptInt&, const OptInt&, const iops::Tensor&>;
constexpr const char* kGemmApi =
    "infini::ops::Gemm of this InfiniOps build (c = alpha * a @ b + beta * c: "
    "InfiniOps 2962714 API)";
#endif

// F.linear's addmm, out = a @ b + bias with a bias row broadcast over the
// rows, runs on infini::ops::Linear where its API is F.linear's (InfiniOps
// 1f6f9c2): it adds the bias in float32 before the one rounding, as CPU's
// fused update does, where Gemm + Add would round twice.
#if defined(TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C) && \
    defined(TORCH_INFINI_OPS_LINEAR_TAKES_WEIGHT) && \
    defined(TORCH_INFINI_OPS_LINEAR_DEVICE_MASK)
#define TORCH_INFINI_GEMM_BIAS_BY_LINEAR 1
using LinearOperator = iops::Operator<iops::Linear>;
using LinearMake = std::unique_ptr<LinearOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const std::optional<iops::Tensor>&, const iops::Tensor&);
LinearMake volatile linear_make =
    &LinearOperator::Make<const iops::Tensor&,
                          const std::optional<iops::Tensor>&,
                          const iops::Tensor&>;
#endif

// One call in Gemm's terms: out[b] = alpha * a[b] @ b[b] + beta * bias,
// every operand a device tensor's memory and layout.
struct GemmCall {
  TensorArg a, b, out;  // 2-D, or 3-D batched over dimension 0
  std::optional<TensorArg> bias;  // not broadcast yet; none if beta == 0
  c10::Scalar alpha = 1;
  c10::Scalar beta = 0;
};

// The overloads served and where their arguments are.
enum class Form { kMm, kAddmm, kAddmmInPlace, kAddmv, kAddmvInPlace };

Form form_of(const std::string& name) {
  if (name == "aten::mm.out" || name == "aten::bmm.out") return Form::kMm;
  if (name == "aten::addmm.out" || name == "aten::baddbmm.out") {
    return Form::kAddmm;
  }
  if (name == "aten::addmm_" || name == "aten::baddbmm_") {
    return Form::kAddmmInPlace;
  }
  if (name == "aten::addmv.out") return Form::kAddmv;
  return Form::kAddmvInPlace;
}

// A vector as an (n, 1) column: a matrix-vector product is a Gemm with N = 1.
TensorArg column(const TensorArg& v) {
  TensorArg c = v;
  c.sizes = {v.sizes.empty() ? 1 : v.sizes[0], 1};
  c.strides = {v.strides.empty() ? 1 : v.strides[0], 1};
  return c;
}

// The call as a GemmCall, or a reason it is not one Gemm serves.
std::string gemm_call_of(const AtenCall& call, GemmCall* gemm) {
  const Form form = form_of(overload_name(call));
  at::Tensor a, b, out, bias;
  if (form == Form::kMm) {
    a = tensor_at(call, 0);
    b = tensor_at(call, 1);
    out = tensor_at(call, 2);
  } else {
    bias = tensor_at(call, 0);
    a = tensor_at(call, 1);
    b = tensor_at(call, 2);
    gemm->beta = call.args.at(3).toScalar();
    gemm->alpha = call.args.at(4).toScalar();
    out = (form == Form::kAddmm || form == Form::kAddmv) ? tensor_at(call, 5)
                                                         : bias;
  }
  for (const auto& s : {gemm->alpha, gemm->beta}) {
    if (s.isComplex()) {
      return "a complex alpha or beta has no meaning for " +
          std::string(kGemmApi);
    }
  }
  for (const at::Tensor* t : {&a, &b, &out, &bias}) {
    if (t->defined() && t->device().is_cpu()) {
      return "a CPU scalar operand has no device memory for " +
          std::string(kGemmApi);
    }
  }
  gemm->a = arg_of(a);
  gemm->b = arg_of(b);
  gemm->out = arg_of(out);
  // With beta == 0 PyTorch ignores the bias (NaN and inf in it included).
  if (bias.defined() && gemm->beta.toDouble() != 0.0) {
    gemm->bias = arg_of(bias);
  }
  if (form == Form::kAddmv || form == Form::kAddmvInPlace) {
    gemm->b = column(gemm->b);
    gemm->out = column(gemm->out);
    if (gemm->bias && gemm->bias->sizes.size() == 1) {
      gemm->bias = column(*gemm->bias);
    }
  }
  return {};
}

bool gemm_dtype(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half ||
      t == c10::ScalarType::BFloat16;
}

class GemmServer {
 public:
  explicit GemmServer(InfiniProvider& provider) : provider_(provider) {}

  // Whether the ATen-backed Gemm (index 2) serves: it accumulates a bias.
  bool accumulates() const { return accumulates_; }

  // Whether run() would make two launches of a float32 call with a bias
  // (beta != 0): the product, then an Add of the bias (1f6f9c2's Gemm takes
  // no C), or a copy of the bias into the output, then the product
  // (2962714's). The overload's generic binding, ATen-backed, runs it as
  // one at::addmm_out (or baddbmm, addmv): half the launches, and CPU's one
  // rounding. Read from the arguments without parsing the call (asked
  // before unsupported()).
  bool launches_twice(const AtenCall& call) const {
    if (accumulates_ || form_of(overload_name(call)) == Form::kMm) {
      return false;
    }
    const c10::IValue& bias = call.args.at(0);
    return bias.isTensor() && bias.toTensor().defined() &&
        bias.toTensor().scalar_type() == c10::ScalarType::Float &&
        call.args.at(3).toScalar().toDouble() != 0.0;
  }

  std::string unsupported(const AtenCall& call) const {
    GemmCall gemm;
    std::string reason = gemm_call_of(call, &gemm);
    if (!reason.empty()) {
      return reason;
    }
    const c10::ScalarType dtype = gemm.out.dtype;
    if (dtype == c10::ScalarType::Double) {
      return std::string(kGemmApi) +
          " accumulates float64 in float32 (about 1e-7 relative error where "
          "PyTorch gives 1e-16)";
    }
    if (!gemm_dtype(dtype)) {
      return std::string(kGemmApi) + " has no " + dtype_name(dtype) +
          " kernel (float32, float16, bfloat16 only)";
    }
    for (const TensorArg* t : {&gemm.a, &gemm.b}) {
      if (t->dtype != dtype) {
        return std::string(kGemmApi) +
            " reads every operand as the output's dtype " + dtype_name(dtype) +
            ", but an operand is " + dtype_name(t->dtype);
      }
    }
    if (gemm.bias && gemm.bias->dtype != dtype) {
      return "the bias's dtype " + dtype_name(gemm.bias->dtype) +
          " differs from the output's " + dtype_name(dtype);
    }
    const size_t rank = gemm.out.sizes.size();
    if ((rank != 2 && rank != 3) || gemm.a.sizes.size() != rank ||
        gemm.b.sizes.size() != rank) {
      return std::string(kGemmApi) +
          " runs 2-D products and 3-D batches only";
    }
    const TensorArg& out = gemm.out;
    if (has_broadcast_dim(out)) {
      return "an output with stride-0 (expanded) dimensions cannot be "
             "written by " + std::string(kGemmApi);
    }
    if (may_overlap(out, gemm.a) || may_overlap(out, gemm.b)) {
      return std::string(kGemmApi) +
          " would overwrite an operand it still reads (the output shares "
          "memory with mat1 or mat2)";
    }
    if (gemm.bias) {
      if (!broadcasts_to(*gemm.bias, out.sizes)) {
        return "the bias does not broadcast to the output";
      }
      const TensorArg bias = expanded(*gemm.bias, out.sizes);
      if (!same_layout(bias, out) && may_overlap(bias, out)) {
        return "the bias shares memory with the output in another layout, "
               "which " + std::string(kGemmApi) + " cannot update in place";
      }
      reason = accumulates_ ? accumulate_bias_unsupported(bias, out)
                            : bias_unsupported(gemm, bias, out);
      if (!reason.empty()) {
        return reason;
      }
    }
    return {};
  }

  void run(int device, StreamHandle stream, const AtenCall& call) {
    GemmCall gemm;
    gemm_call_of(call, &gemm);
    provider_.bind(device);
    const float alpha = static_cast<float>(gemm.alpha.toDouble());
#ifdef TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C
    if (accumulates_) {
      // On the ATen-backed Gemm: as CPU's addmm computes it.
      launch_accumulating(device, stream, gemm, alpha);
      return;
    }
    const TensorArg& out = gemm.out;
    if (!gemm.bias) {
      launch(device, stream, gemm.a, gemm.b, alpha, 0.0f, out);
      return;
    }
#ifdef TORCH_INFINI_GEMM_BIAS_BY_LINEAR
    if (const auto row = linear_bias(gemm); row && !product_then_add(gemm)) {
      launch_linear(device, stream, gemm, *row);
      return;
    }
#endif
    // y = alpha * a @ b, then out = y + beta * bias. When the bias is the
    // output (addmm_), y needs memory of its own, taken from the device
    // allocator on this stream: its reuse after this launch is stream-ordered.
    const TensorArg bias = expanded(*gemm.bias, out.sizes);
    c10::DataPtr scratch;
    TensorArg y = out;
    if (may_overlap(bias, out)) {
      scratch = c10::GetAllocator(c10::DeviceType::PrivateUse1)
                    ->allocate(numel_of(out) * c10::elementSize(out.dtype));
      y.data = scratch.get();
      y.strides = contiguous_strides(out.sizes);
    }
    launch(device, stream, gemm.a, gemm.b, alpha, 0.0f, y);
    launch_add(provider_, device, stream, BinaryArgs{y, bias, out, gemm.beta});
#else
    launch_accumulating(device, stream, gemm, alpha);
#endif
  }

 private:
  // c = bias (unless it is already there), then c = alpha*a@b + beta*c.
  void launch_accumulating(int device, StreamHandle stream,
                           const GemmCall& gemm, float alpha) {
    const TensorArg& out = gemm.out;
    float beta = 0.0f;
    if (gemm.bias) {
      const TensorArg bias = expanded(*gemm.bias, out.sizes);
      if (!same_layout(bias, out)) {
        launch_cast(provider_, device, stream, CopyArgs{bias, out});
      }
      beta = static_cast<float>(gemm.beta.toDouble());
    }
    launch(device, stream, gemm.a, gemm.b, alpha, beta, out);
  }

#ifdef TORCH_INFINI_GEMM_BIAS_BY_LINEAR
  // The bias as Linear's [N] vector when `gemm` is F.linear's addmm on a
  // backend with Linear (alpha = beta = 1, 2-D, one bias row for all rows,
  // not in the output's memory); nullopt otherwise.
  std::optional<TensorArg> linear_bias(const GemmCall& gemm) const {
    if (!gemm.bias || gemm.out.sizes.size() != 2 ||
        !gemm.alpha.equal(1) || !gemm.beta.equal(1) ||
        !has_implementation(provider_.device_type(),
                            TORCH_INFINI_OPS_LINEAR_DEVICE_MASK)) {
      return std::nullopt;
    }
    const TensorArg bias = expanded(*gemm.bias, gemm.out.sizes);
    if ((gemm.out.sizes[0] != 1 && bias.strides[0] != 0) ||
        may_overlap(bias, gemm.out)) {
      return std::nullopt;
    }
    TensorArg row = bias;
    row.sizes = {bias.sizes[1]};
    row.strides = {bias.strides[1]};
    return row;
  }

  // out = a @ b + bias on Linear: input a [M, K], weight bᵀ [N, K].
  void launch_linear(int device, StreamHandle stream, const GemmCall& gemm,
                     const TensorArg& bias) {
    TensorArg weight = gemm.b;
    weight.sizes = {gemm.b.sizes[1], gemm.b.sizes[0]};
    weight.strides = {gemm.b.strides[1], gemm.b.strides[0]};
    irt::DataType dtype;
    to_infini_dtype(gemm.out.dtype, &dtype);
    const irt::Device where(provider_.device_type(), device);
    const iops::Tensor input = view_of(gemm.a, dtype, where);
    const iops::Tensor w = view_of(weight, dtype, where);
    const std::optional<iops::Tensor> b = view_of(bias, dtype, where);
    const iops::Tensor out = view_of(gemm.out, dtype, where);
    OperatorKey key;
    key.words.push_back(device);
    key.words.push_back(static_cast<int64_t>(gemm.out.dtype));
    append_layout(key, gemm.a);
    append_layout(key, weight);
    append_layout(key, bias);
    append_layout(key, gemm.out);
    thread_local OperatorCache<LinearOperator> cache;
    LinearOperator& op = cache.get(std::move(key), [&] {
      return linear_make(iops::Config(), input, w, b, out);
    });
    op.set_stream(stream);
    static_cast<const iops::Linear&>(op)(input, w, b, out);
  }
#endif

  // Why the bias update cannot run (empty if it can).
  std::string bias_unsupported(const GemmCall& gemm, const TensorArg& bias,
                               const TensorArg& out) const {
#ifdef TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C
#ifdef TORCH_INFINI_GEMM_BIAS_BY_LINEAR
    if (linear_bias(gemm) && !product_then_add(gemm)) {
      return {};
    }
#endif
    // Otherwise the bias is added by infini::ops::Add with alpha = beta:
    // exact enough in float32, but in float16/bfloat16 the product is
    // rounded before the add, which cancellation turns into many ulps.
    if (out.dtype != c10::ScalarType::Float) {
      return std::string(kGemmApi) + " has no beta, and adding this bias "
          "afterwards would round twice in " + dtype_name(out.dtype) +
          " (only F.linear's bias row with alpha = beta = 1 is fused, by "
          "infini::ops::Linear)";
    }
    BinaryArgs add{out, bias, out, gemm.beta};
    const std::string reason = add_unsupported(provider_, add);
    if (!reason.empty()) {
      return std::string(kGemmApi) + " ignores beta, and the bias update " +
          "by infini::ops::Add cannot run: " + reason;
    }
#else
    // The bias is copied into the output by infini::ops::Cast.
    if (!same_layout(bias, out)) {
      const std::string reason =
          cast_unsupported(provider_, CopyArgs{bias, out});
      if (!reason.empty()) {
        return "the bias must first be copied into the output for " +
            std::string(kGemmApi) + ", and " + reason;
      }
    }
#endif
    return {};
  }

  void launch(int device, StreamHandle stream, const TensorArg& a,
              const TensorArg& b, float alpha, float beta,
              const TensorArg& out) {
    irt::DataType dtype;
    to_infini_dtype(out.dtype, &dtype);
    const irt::Device where(provider_.device_type(), device);
    const iops::Tensor ta = view_of(a, dtype, where);
    const iops::Tensor tb = view_of(b, dtype, where);
    const iops::Tensor ty = view_of(out, dtype, where);
    const size_t index = index_for(out);
    OperatorKey key;
    key.words.push_back(device);
    key.words.push_back(static_cast<int64_t>(index));
    key.words.push_back(static_cast<int64_t>(out.dtype));
    append_layout(key, a);
    append_layout(key, b);
    append_layout(key, out);
#ifdef TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C
    // The ATen-backed Gemm accumulates into y where C is given (beta).
    const std::optional<iops::Tensor> c =
        accumulates_ && beta != 0.0f ? std::optional<iops::Tensor>(ty)
                                     : std::nullopt;
    key.words.push_back(c.has_value());
#endif
    // alpha and beta are passed on every call (operator() prefers them to
    // the ones the object was made with), so one object serves all values.
    thread_local OperatorCache<GemmOperator> cache;
    GemmOperator& op = cache.get(std::move(key), [&] {
      iops::Config config;
      config.set_implementation_index(index);
#ifdef TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C
      return gemm_make(config, ta, tb, c, alpha, beta, 0, 0, ty);
#else
      return gemm_make(config, ta, tb, alpha, beta, 0, 0, ty);
#endif
    });
    op.set_stream(stream);
    const auto& run = static_cast<const iops::Gemm&>(op);
    // The ATen-backed Gemm calls at::addmm_out on this thread.
    const OneCallInProfiles one_call_in_profiles;
#ifdef TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C
    run(ta, tb, c, alpha, beta, 0, 0, ty);
#else
    run(ta, tb, alpha, beta, 0, 0, ty);
#endif
  }

  // A bias copied into the output by infini::ops::Cast before the product
  // accumulates into it.
  std::string accumulate_bias_unsupported(const TensorArg& bias,
                                          const TensorArg& out) const {
    if (same_layout(bias, out)) {
      return {};
    }
    const std::string reason = cast_unsupported(provider_, CopyArgs{bias, out});
    return reason.empty() ? reason
                          : "the bias must first be copied into the output "
                            "for the ATen-backed infini::ops::Gemm, and " +
            reason;
  }

  InfiniProvider& provider_;
  // The implementation for an output `out`: InfiniOps' ATen-backed Gemm
  // (index 2, hand-written in InfiniOps and built WITH_TORCH=ON:
  // at::addmm_out, so bit-equal to CPU and BLAS-fast) where the build has
  // it for the device and it was measured faster there, or nothing was
  // measured (runtime/implementation_preferences.h); else the native one
  // (index 0).
  size_t index_for(const TensorArg& out) const {
    return hand_written_index(provider_, "Gemm", 2, numel_of(out), out.dtype,
                              /*aten_when_unmeasured=*/true);
  }
  // InfiniOps' Gemm has no C input at this API (beta is always 0), so the
  // ATen-backed one cannot accumulate a bias either.
  const bool accumulates_ = false;

  // A float32 bias is added after the ATen-backed product (Add) rather than
  // fused by the native Linear: one more rounding, but BLAS speed.
  bool product_then_add(const GemmCall& gemm) const {
    return index_for(gemm.out) == 2 &&
        gemm.out.dtype == c10::ScalarType::Float;
  }
};

#endif  // TORCH_INFINI_OPS_GEMM_DEVICE_MASK

}  // namespace

std::vector<AtenServer> gemm_servers(InfiniProvider& provider,
                                     std::vector<OpSupport>& support) {
  const std::vector<std::string> overloads = {
      "aten::mm.out",     "aten::addmm.out",    "aten::addmm_",
      "aten::bmm.out",    "aten::baddbmm.out",  "aten::baddbmm_",
      "aten::addmv.out",  "aten::addmv_"};
#ifdef TORCH_INFINI_OPS_GEMM_DEVICE_MASK
  if (has_implementation(provider.device_type(),
                         TORCH_INFINI_OPS_GEMM_DEVICE_MASK)) {
    auto server = std::make_shared<GemmServer>(provider);
    OpSupport row;
    row.op = "matmul: aten::mm, aten::addmm, aten::bmm, aten::baddbmm, "
             "aten::addmv (2-D and 3-D; beta and alpha)";
    row.dtypes = {c10::ScalarType::Float, c10::ScalarType::Half,
                  c10::ScalarType::BFloat16};
    row.alpha = true;
    row.broadcast = true;  // the bias
    row.strided = true;
#if defined(TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C)
    if (server->accumulates()) {
      row.kernel =
          "infini::ops::Gemm (ATen-backed, implementation 2: at::addmm_out; "
          "+ infini::ops::Cast to copy a bias)";
      support.push_back(std::move(row));
      return {served_by(overloads, server)};
    }
#endif
#if defined(TORCH_INFINI_GEMM_BIAS_BY_LINEAR)
    row.kernel =
        "infini::ops::Gemm (F.linear's addmm: infini::ops::Linear; other "
        "biases, float32 only: + infini::ops::Add)";
#elif defined(TORCH_INFINI_OPS_GEMM_HAS_OPTIONAL_C)
    row.kernel =
        "infini::ops::Gemm (+ infini::ops::Add for a bias, float32 only)";
#else
    row.kernel = "infini::ops::Gemm (+ infini::ops::Cast to copy a bias)";
#endif
    support.push_back(std::move(row));
    AtenServer served = served_by(overloads, server);
    served.generic_first = [server](const AtenCall& call) {
      return server->launches_twice(call);
    };
    return {std::move(served)};
  }
#endif
  return {refused(overloads, "infini::ops::Gemm", provider.backend())};
}

}  // namespace torch_infini::runtime::infini
