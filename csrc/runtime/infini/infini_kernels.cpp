// Kernels of the Infini stack provider: InfiniOps operators.
//
// InfiniOps asserts (aborts the process) on input it cannot run, so every
// launch is preceded by a check of everything it would reject: dtype, an
// implementation for the selected backend, and argument limits.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/infini/add_alpha.h"
#include "runtime/complex_pairs.h"
#include "runtime/infini/infini_aten.h"
#include "runtime/infini/infini_binding.h"
#include "runtime/infini/infini_common.h"
#include "runtime/infini/infini_fused.h"
#include "runtime/infini/infini_provider.h"
#include "runtime/infini/operator_cache.h"
#include "runtime/infini/profiler_guard.h"
#include "runtime/fused_kernels.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::infini {

const char* const kFallbackHint =
    "turn on the CPU fallback (torch_infini.fallback.enable() or "
    "TORCH_INFINI_CPU_FALLBACK=1) or use the host runtime "
    "(TORCH_INFINI_PROVIDER=host)";

std::string no_kernel_reason(const std::string& overload,
                             const std::string& kernel,
                             const std::string& backend) {
  const std::string op = overload.substr(0, overload.find('.'));
  std::string reason = "InfiniOps has no kernel for " + op;
  if (!kernel.empty()) {
    reason += " (no " + kernel + " implementation for " + backend +
        " in this build)";
  } else {
    reason += " (no InfiniOps operator computes it)";
  }
  return reason + "; " + kFallbackHint;
}

namespace {

using AddOperator = iops::Operator<iops::Add>;
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
using AddMake = std::unique_ptr<AddOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const double&, const iops::Tensor&);
AddMake volatile add_make =
    &AddOperator::Make<const iops::Tensor&, const double&, const iops::Tensor&>;
#else
using AddMake = std::unique_ptr<AddOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const iops::Tensor&);
AddMake volatile add_make =
    &AddOperator::Make<const iops::Tensor&, const iops::Tensor&>;
#endif

#ifndef TORCH_INFINI_OPS_ADD_DEVICE_MASK
#define TORCH_INFINI_OPS_ADD_DEVICE_MASK 0
#endif

#ifdef TORCH_INFINI_OPS_CAST_DEVICE_MASK
using CastOperator = iops::Operator<iops::Cast>;
using CastMake = std::unique_ptr<CastOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&);
CastMake volatile cast_make = &CastOperator::Make<const iops::Tensor&>;
#else
#define TORCH_INFINI_OPS_CAST_DEVICE_MASK 0
#endif

bool is_float(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half ||
      t == c10::ScalarType::BFloat16 || t == c10::ScalarType::Double;
}

// Whether infini::ops::Cast converts `from` to `to` exactly as PyTorch does.
// Its conversions are C casts, except that float16 and bfloat16 go through
// float32 and float16 is rounded toward zero (PyTorch rounds to nearest
// even), and bfloat16 rounding ignores NaN payloads: so only conversions
// that need no float16/bfloat16 rounding, and no float->integer cast
// (undefined in C++ outside the integer's range, where PyTorch wraps).
bool cast_exact(c10::ScalarType from, c10::ScalarType to) {
  if (from == to) {
    return true;  // a copy
  }
  if (to == c10::ScalarType::Float || to == c10::ScalarType::Double) {
    return true;  // widening, or a C cast rounding to nearest even
  }
  if (to == c10::ScalarType::Half || to == c10::ScalarType::BFloat16) {
    return false;
  }
  return !is_float(from);  // integer -> integer: C casts wrap like PyTorch
}

}  // namespace

std::string add_unsupported(const InfiniProvider& provider,
                            const BinaryArgs& args) {
  if (!has_implementation(provider.device_type(),
                          TORCH_INFINI_OPS_ADD_DEVICE_MASK)) {
    return "InfiniOps has no Add implementation for InfiniRT backend '" +
        provider.backend() + "'";
  }
  irt::DataType dtype;
  if (!to_infini_dtype(args.out.dtype, &dtype)) {
    return "dtype " + dtype_name(args.out.dtype) +
        " is not supported by InfiniOps' Add (" +
        missing_datatype(args.out.dtype) + "; supported: float32, float16, "
        "bfloat16, float64, int8, int16, int32, int64, uint8); " +
        std::string(kFallbackHint);
  }
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
  // InfiniOps takes alpha as a double: integers beyond 2^53 would round.
  if (args.alpha.isIntegral(false) &&
      std::abs(args.alpha.toLong()) > (int64_t{1} << 53)) {
    return "alpha " + std::to_string(args.alpha.toLong()) +
        " is not exactly representable as the double InfiniOps' Add takes";
  }
#else
  if (args.alpha.toDouble() != 1.0) {
    return "alpha != 1 is not supported: this InfiniOps build's Add has no "
           "alpha (InfiniOps 1f6f9c2 or newer has it); compute "
           "torch.add(a, b * alpha) instead";
  }
#endif
  return {};
}

void launch_add(InfiniProvider& provider, int device, StreamHandle stream,
                const BinaryArgs& args) {
  provider.bind(device);
  irt::DataType dtype;
  to_infini_dtype(args.out.dtype, &dtype);
  const irt::Device where(provider.device_type(), device);
  const iops::Tensor self = view_of(args.self, dtype, where);
  const iops::Tensor other = view_of(args.other, dtype, where);
  const iops::Tensor out = view_of(args.out, dtype, where);
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
  const double alpha = args.alpha.toDouble();
#endif
  // InfiniOps' ATen-backed Add (index 1: at::add_out, CPU eager's kernel)
  // where it was measured faster, else the native one (index 0); one
  // operator object per implementation, layout and thread.
  const size_t index = hand_written_index(
      provider, "Add", 1, numel_of(args.out), args.out.dtype,
      /*aten_when_unmeasured=*/false,
      in_measured_form({&args.self, &args.other, &args.out}));
  // ATen's kernel goes parallel above its grain size by itself.
  const SerialOpenMPScope serial(index == 0 &&
                                 serial_launch(provider, args.out));
  OperatorKey key;
  key.words.push_back(device);
  key.words.push_back(static_cast<int64_t>(index));
  key.words.push_back(static_cast<int64_t>(args.out.dtype));
  append_layout(key, args.self);
  append_layout(key, args.other);
  append_layout(key, args.out);
  thread_local OperatorCache<AddOperator> cache;
  AddOperator& op = cache.get(std::move(key), [&] {
    iops::Config config;
    config.set_implementation_index(index);
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
    return add_make(config, self, other, alpha, out);
#else
    return add_make(config, self, other, out);
#endif
  });
  op.set_stream(stream);
  const auto& add = static_cast<const iops::Add&>(op);
  const OneCallInProfiles one_call_in_profiles;  // index 1 calls at::add_out
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
  add(self, other, alpha, out);
#else
  add(self, other, out);
#endif
}

std::string cast_unsupported(const InfiniProvider& provider,
                             const CopyArgs& args) {
  if (!has_implementation(provider.device_type(),
                          TORCH_INFINI_OPS_CAST_DEVICE_MASK)) {
    return "InfiniOps has no Cast implementation for InfiniRT backend '" +
        provider.backend() + "'";
  }
  irt::DataType dtype;
  for (const TensorArg* t : {&args.src, &args.dst}) {
    if (!to_infini_dtype(t->dtype, &dtype)) {
      return "infini::ops::Cast has no " + dtype_name(t->dtype) + " kernel (" +
          missing_datatype(t->dtype) + ")";
    }
  }
  if (!cast_exact(args.src.dtype, args.dst.dtype)) {
    return "infini::ops::Cast does not convert " + dtype_name(args.src.dtype) +
        " to " + dtype_name(args.dst.dtype) +
        " as PyTorch does (float16 rounds toward zero, float to integer "
        "casts are unchecked)";
  }
  if (args.src.sizes != args.dst.sizes || has_broadcast_dim(args.dst)) {
    return "infini::ops::Cast needs a source of the destination's shape and "
           "a destination without stride-0 dimensions";
  }
  if (may_overlap(args.src, args.dst) && !same_layout(args.src, args.dst)) {
    return "infini::ops::Cast cannot copy between overlapping tensors";
  }
  return {};
}

void launch_cast(InfiniProvider& provider, int device, StreamHandle stream,
                 const CopyArgs& args) {
#if TORCH_INFINI_OPS_CAST_DEVICE_MASK
  provider.bind(device);
  const irt::Device where(provider.device_type(), device);
  const iops::Tensor src = view_of(args.src, where);
  const iops::Tensor dst = view_of(args.dst, where);
  const SerialOpenMPScope serial(serial_launch(provider, args.dst));
  OperatorKey key;
  key.words.push_back(device);
  key.words.push_back(static_cast<int64_t>(args.src.dtype));
  key.words.push_back(static_cast<int64_t>(args.dst.dtype));
  append_layout(key, args.src);
  append_layout(key, args.dst);
  thread_local OperatorCache<CastOperator> cache;
  CastOperator& op = cache.get(std::move(key), [&] {
    return cast_make(iops::Config(), src, dst);
  });
  op.set_stream(stream);
  static_cast<const iops::Cast&>(op)(src, dst);
#else
  TORCH_CHECK(false, "infini: InfiniOps has no Cast in this build");
#endif
}

namespace {

// InfiniOps' fused operators (infini_fused.cpp) for ops/nn/fused.cpp.
class InfiniFusedKernels final : public FusedKernels {
 public:
  explicit InfiniFusedKernels(InfiniProvider& provider) : provider_(provider) {}

  std::string unsupported(const FusedArgs& args) const override {
    return fused_unsupported(provider_, args);
  }

  void launch(int device, StreamHandle stream, const FusedArgs& args) override {
    launch_fused(provider_, device, stream, args);
  }

 private:
  InfiniProvider& provider_;
};

class InfiniKernels final : public OpKernels {
 public:
  explicit InfiniKernels(InfiniProvider& provider)
      : provider_(provider), fused_(provider), generic_(provider) {
    set_fused_kernels(&fused_);
    // InfiniOps' elementwise kernels cover its AllTypes (floating and integer
    // types); whether Add has an implementation on the selected backend is
    // asked of InfiniOps itself.
    if (has_implementation(provider.device_type(),
                           TORCH_INFINI_OPS_ADD_DEVICE_MASK)) {
      support_.push_back(OpSupport{
          "aten::add.Tensor",
          numeric_dtypes(/*with_bool=*/false),
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
          /*alpha=*/true,
#else
          /*alpha=*/false,
#endif
          /*broadcast=*/true,
          /*strided=*/true,
          "infini::ops::Add"});
    }
    if (has_implementation(provider.device_type(),
                           TORCH_INFINI_OPS_CAST_DEVICE_MASK)) {
      support_.push_back(OpSupport{
          "aten::copy_ (strided, or converting without float16/bfloat16 "
          "rounding, on device)",
          numeric_dtypes(/*with_bool=*/false),
          /*alpha=*/false,
          /*broadcast=*/true,
          /*strided=*/true,
          "infini::ops::Cast"});
    }
    // No fill kernel here: the ops layer runs fill.Scalar_out (InfiniOps'
    // Fill) where the build serves it, else copies a host-prepared buffer.
    support_.push_back(OpSupport{
        "aten::fill_.Scalar (and zero_, fill_.Tensor)",
        numeric_dtypes(/*with_bool=*/true),
        /*alpha=*/false,
        /*broadcast=*/false,
        /*strided=*/true,
        "infini::ops::Fill through aten::fill.Scalar_out where this build "
        "serves it (integers to 2^53; bool as its uint8 view); else a "
        "host-prepared buffer copied with InfiniRT Memcpy"});
    // The fused operators that have no ATen operator of their own.
    const struct {
      FusedOp op;
      const char* entry;
      std::vector<c10::ScalarType> dtypes;
    } fused[] = {
        {FusedOp::kRmsNorm,
         "aten::rms_norm (F.rms_norm over the last dimension, with a weight "
         "of the input's dtype)",
         {c10::ScalarType::Float, c10::ScalarType::Half,
          c10::ScalarType::BFloat16}},
        {FusedOp::kSwiglu, "infini::swiglu (same shapes and dtype)",
         floating_dtypes()},
        {FusedOp::kSiluAndMul, "infini::silu_and_mul", floating_dtypes()},
        {FusedOp::kCausalSoftmax, "infini::causal_softmax",
         {c10::ScalarType::Float, c10::ScalarType::Half,
          c10::ScalarType::BFloat16}},
    };
    for (const auto& f : fused) {
      if (fused_kernel_present(provider, f.op)) {
        support_.push_back(OpSupport{
            f.entry, f.dtypes, /*alpha=*/false, /*broadcast=*/false,
            /*strided=*/true,
            std::string("infini::ops::") +
                (f.op == FusedOp::kSiluAndMul &&
                         !has_implementation(
                             provider.device_type(),
#ifdef TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK
                             TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK
#else
                             0
#endif
                             )
                     ? "Swiglu (over the input's halves)"
                     : fused_op_name(f.op))});
      }
    }
    for (auto make : {&gemm_servers, &cat_servers}) {
      for (auto& server : make(provider, support_)) {
        servers_.push_back(std::move(server));
      }
    }
    for (const auto& server : servers_) {
      for (const auto& name : server.overloads) {
        by_overload_.emplace(name, &server);
      }
    }
    add_binding_rows();
  }

  const std::vector<OpSupport>& support() const override { return support_; }

  std::string binary_unsupported(const BinaryArgs& args) const override {
    if (!has_binary(args.op)) {
      return "InfiniOps' kernels of this op are bound through the generic "
             "kernel";
    }
    std::string reason = infini::add_unsupported(provider_, args);
    // Where the build has the ATen-backed Add, a call the native one would
    // round otherwise than ATen goes to it (ops/arithmetic.cpp passes the
    // call to the generic binding, whose native limits refuse it the same
    // way).
    if (reason.empty() && !add_alpha_is_exact(args.alpha, args.out.dtype) &&
        aten_backed("aten::add.out")) {
      reason = "infini::ops::Add (native) computes a + alpha * b with two "
          "roundings where ATen's add rounds once; the ATen-backed Add runs "
          "it";
    }
    return reason;
  }

  void binary(int device, StreamHandle stream,
              const BinaryArgs& args) override {
    launch_add(provider_, device, stream, args);
  }

  // Add only: InfiniOps' other element-wise operators (Mul, Sub where the
  // build has them) are served through the generic binding.
  bool has_binary(BinaryOp op) const override { return op == BinaryOp::kAdd; }

  std::string copy_unsupported(const CopyArgs& args) const override {
    return cast_unsupported(provider_, args);
  }

  void copy(int device, StreamHandle stream, const CopyArgs& args) override {
    launch_cast(provider_, device, stream, args);
  }

  std::string fill_unsupported(const FillArgs& /*args*/) const override {
    return "InfiniOps has no fill kernel in this build";
  }

  void fill(int, StreamHandle, const FillArgs&) override {
    TORCH_CHECK(false, "infini: device fill kernel is not available");
  }

  bool maps(const std::string& overload) const override {
    const auto it = by_overload_.find(overload);
    return (it != by_overload_.end() && it->second->run) ||
        generic_.find(overload) != nullptr;
  }

  AtenRefusal aten_unsupported(const AtenCall& call) const override {
    int implementation = -1;
    return refusal_of(call, &implementation);
  }

  AtenLaunch aten(int device, StreamHandle stream, AtenCall& call) override {
    const std::string& name = overload_name(call);
    int implementation = -1;
    AtenLaunch launch{refusal_of(call, &implementation)};
    if (launch.refusal.refused()) {
      return launch;
    }
    launch.aten_backed = implementation == kAtenBackedIndex;
    if (implementation < 0) {
      by_overload_.at(name)->run(device, stream, call);
    } else {
      generic_.run(*generic_.find(name), device, stream, call, implementation);
    }
    return launch;
  }

 private:
  // Whether the generic binding of `overload` has an ATen-backed
  // implementation for this backend.
  bool aten_backed(const std::string& overload) const {
    const Binding* bound = generic_.find(overload);
    return bound != nullptr &&
        has_implementation_index(bound->implementations,
                                 static_cast<int>(provider_.device_type()),
                                 kAtenBackedIndex);
  }

  // Whether the ATen-backed implementation of the operator whose native
  // implementation a hand-written entry runs (Cat) was measured faster on
  // this backend for `call`: then it goes first, and the entry serves what
  // it refuses.
  bool aten_backed_first(const Binding& bound, const AtenCall& call) const {
    const int type = static_cast<int>(provider_.device_type());
    return native_index(bound.implementations, type) >= 0 &&
        has_implementation_index(bound.implementations, type,
                                 kAtenBackedIndex) &&
        generic_.faster(bound, call) == ImplementationKind::kAtenBacked;
  }

  // Whether this build has an InfiniOps implementation, for this backend, of
  // an operator that serves `name` (a hand-written entry's or the generic
  // binding's), whatever its limits.
  bool has_kernel(const std::string& name) const {
    const auto hand = by_overload_.find(name);
    if (hand != by_overload_.end() && hand->second->run) {
      return true;
    }
    const Binding* bound = generic_.find(name);
    return bound != nullptr && generic_.has_kernel(*bound);
  }

  // Empty where a kernel runs `call` (the implementation chosen in
  // *implementation, see decide); otherwise why not, saying that it is
  // InfiniOps' limit (tests and users tell a missing kernel from an error
  // by it) and how to run the call anyway.
  AtenRefusal refusal_of(const AtenCall& call, int* implementation) const {
    const std::string& name = overload_name(call);
    bool cannot_take = false;
    AtenRefusal refusal{decide(name, call, implementation, &cannot_take),
                        /*no_kernel=*/false};
    if (!refusal.refused()) {
      return refusal;
    }
    refusal.no_kernel = !has_kernel(name) || cannot_take;
    if (refusal.reason.find(kFallbackHint) != std::string::npos) {
      return refusal;
    }
    if (refusal.reason.find("InfiniOps") == std::string::npos) {
      refusal.reason = "not served by InfiniOps: " + refusal.reason;
    }
    refusal.reason += std::string("; ") + kFallbackHint;
    return refusal;
  }

  // Who runs `call`: a hand-written entry that accepts it (its native
  // kernel; *implementation stays -1), else the generic binding with the
  // implementation it picks. Empty when one does; otherwise why not.
  std::string decide(const std::string& name, const AtenCall& call,
                     int* implementation, bool* cannot_take = nullptr) const {
    const auto it = by_overload_.find(name);
    const AtenServer* hand = it == by_overload_.end() ? nullptr : it->second;
    const Binding* bound = generic_.find(name);
    if (hand != nullptr && hand->run && bound != nullptr &&
        (aten_backed_first(*bound, call) ||
         (hand->generic_first && hand->generic_first(call))) &&
        generic_.choose(*bound, call, /*native_allowed=*/false,
                        implementation)
            .empty()) {
      return {};
    }
    std::string hand_reason;
    if (hand != nullptr) {
      hand_reason = hand->unsupported(call);
      if (hand_reason.empty() && hand->run) {
        return {};
      }
    }
    if (bound == nullptr) {
      return hand != nullptr ? hand_reason
                             : no_kernel_reason(name, "", provider_.backend());
    }
    const bool hand_native = hand != nullptr && hand->run;
    std::string reason = generic_.choose(*bound, call,
                                         /*native_allowed=*/!hand_native,
                                         implementation, cannot_take);
    if (reason.empty() || !hand_native) {
      return reason;
    }
    if (cannot_take != nullptr) {
      *cannot_take = false;  // the hand-written entry refused for a limit
    }
    return hand_reason + "; " + reason;
  }

  // One support row per bound overload, saying which implementation serves
  // it on this backend (`python -m torch_infini --ops`).
  void add_binding_rows() {
    std::vector<std::string> names;
    for (const auto& entry : generic_.bindings()) {
      names.push_back(entry.first);
    }
    std::sort(names.begin(), names.end());
    const int type = static_cast<int>(provider_.device_type());
    for (const auto& name : names) {
      const Binding& b = *generic_.find(name);
      std::string how;
      for (const auto& impl : b.implementations) {
        if (impl.device_type == type) {
          how += (how.empty() ? "" : ", ") + implementation_label(impl.index) +
              " " + std::to_string(impl.index);
        }
      }
      if (how.empty()) {
        continue;  // refused on this backend
      }
      const auto hand = by_overload_.find(name);
      if (hand != by_overload_.end() && hand->second->run) {
        how += "; native limits checked by a hand-written entry";
      }
      OpSupport row;
      row.op = name;
      row.dtypes = numeric_dtypes(/*with_bool=*/false);
      row.broadcast = true;
      row.strided = true;
      row.kernel = "infini::ops::" + b.op + " (" + how + ")";
      support_.push_back(std::move(row));
    }
  }

  InfiniProvider& provider_;
  InfiniFusedKernels fused_;
  GenericServer generic_;
  std::vector<OpSupport> support_;
  std::vector<AtenServer> servers_;
  std::unordered_map<std::string, const AtenServer*> by_overload_;
};

}  // namespace

std::unique_ptr<OpKernels> make_infini_kernels(InfiniProvider& provider) {
  return std::make_unique<InfiniKernels>(provider);
}

}  // namespace torch_infini::runtime::infini
