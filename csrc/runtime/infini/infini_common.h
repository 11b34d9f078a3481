#pragma once

// What every InfiniOps launch of the Infini provider shares: tensor views,
// dtype mapping, the per-backend availability of an operator, and the OpenMP
// scope for small launches.
//
// InfiniOps asserts (aborts the process) on input it cannot run, so every
// launch is preceded by a check of everything it would reject; these helpers
// are what those checks are made of.

#include <ATen/core/Tensor.h>
#include <infini/ops.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <string>

#include "runtime/infini/infini_provider.h"
#include "runtime/kernels.h"

// OpenMP, weakly: present when InfiniOps' CPU backend was built with it (and
// PyTorch's libgomp is loaded anyway); absent symbols simply disable the scope.
extern "C" {
int omp_get_max_threads(void) __attribute__((weak));
void omp_set_num_threads(int) __attribute__((weak));
}

namespace torch_infini::runtime::infini {

namespace iops = ::infini::ops;
namespace irt = ::infini::rt;

// InfiniOps' CPU kernels open an OpenMP parallel region on every call, even
// for one element, where PyTorch's CPU kernels stay serial below GRAIN_SIZE
// elements. On a busy machine a needless parallel region costs from 20 us to
// milliseconds, so small CPU-backend launches run on the calling thread's
// single OpenMP thread. The setting is per thread and restored on exit.
class SerialOpenMPScope {
 public:
  explicit SerialOpenMPScope(bool active)
      : active_(active && omp_get_max_threads != nullptr &&
                omp_set_num_threads != nullptr) {
    if (active_) {
      previous_ = omp_get_max_threads();
      omp_set_num_threads(1);
    }
  }
  ~SerialOpenMPScope() {
    if (active_) {
      omp_set_num_threads(previous_);
    }
  }
  SerialOpenMPScope(const SerialOpenMPScope&) = delete;
  SerialOpenMPScope& operator=(const SerialOpenMPScope&) = delete;

 private:
  const bool active_;
  int previous_ = 1;
};

constexpr int64_t kSerialBelowElements = 32768;  // at::internal::GRAIN_SIZE

// The scope for a launch writing `out` on `provider`'s backend.
inline bool serial_launch(const InfiniProvider& provider, const TensorArg& out) {
  return provider.device_type() == irt::Device::Type::kCpu &&
      numel_of(out) < kSerialBelowElements;
}

inline bool to_infini_dtype(c10::ScalarType t, irt::DataType* out) {
  switch (t) {
    case c10::ScalarType::Float: *out = irt::DataType::kFloat32; return true;
    case c10::ScalarType::Half: *out = irt::DataType::kFloat16; return true;
    case c10::ScalarType::BFloat16: *out = irt::DataType::kBFloat16; return true;
    case c10::ScalarType::Double: *out = irt::DataType::kFloat64; return true;
    case c10::ScalarType::Char: *out = irt::DataType::kInt8; return true;
    case c10::ScalarType::Short: *out = irt::DataType::kInt16; return true;
    case c10::ScalarType::Int: *out = irt::DataType::kInt32; return true;
    case c10::ScalarType::Long: *out = irt::DataType::kInt64; return true;
    case c10::ScalarType::Byte: *out = irt::DataType::kUInt8; return true;
    default: return false;
  }
}

inline std::string dtype_name(c10::ScalarType t) {
  return std::string(c10::getDtypeNames(t).first);
}

inline iops::Tensor view_of(const TensorArg& t, irt::DataType dtype,
                            const irt::Device& device) {
  iops::Tensor::Shape shape(t.sizes.begin(), t.sizes.end());
  iops::Tensor::Strides strides(t.strides.begin(), t.strides.end());
  return iops::Tensor(t.data, shape, dtype, device, strides);
}

// A bool tensor is viewed as uint8, as InfiniOps' own binding reads
// torch.bool: the binding passes only bool results this way, which ATen
// writes as the bytes 0 and 1 (infini_binding.cpp).
inline iops::Tensor view_of(const TensorArg& t, const irt::Device& device) {
  irt::DataType dtype = irt::DataType::kUInt8;
  const bool mapped = to_infini_dtype(t.dtype, &dtype);
  TORCH_INTERNAL_ASSERT(mapped || t.dtype == c10::ScalarType::Bool,
                        "infini: no InfiniRT DataType for ", t.dtype);
  return view_of(t, dtype, device);
}

// A device tensor's memory and layout.
inline TensorArg arg_of(const at::Tensor& t) {
  TensorArg arg;
  arg.data = t.numel() == 0 ? nullptr : t.data_ptr();
  arg.sizes.assign(t.sizes().begin(), t.sizes().end());
  arg.strides.assign(t.strides().begin(), t.strides().end());
  arg.dtype = t.scalar_type();
  return arg;
}

// `t` broadcast to `sizes` (as `t.expand(sizes)` would view it, leading
// dimensions added): InfiniOps walks every input with the output's rank, so
// broadcasting must be a same-rank view with stride 0. The caller has
// checked broadcasts_to(t, sizes).
inline TensorArg expanded(const TensorArg& t, c10::IntArrayRef sizes) {
  TensorArg arg;
  arg.data = t.data;
  arg.dtype = t.dtype;
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const int64_t rank = static_cast<int64_t>(t.sizes.size());
  const int64_t offset = ndim - rank;
  arg.sizes.assign(sizes.begin(), sizes.end());
  arg.strides.assign(ndim, 0);
  for (int64_t i = 0; i < rank; ++i) {
    arg.strides[i + offset] =
        t.sizes[i] == 1 && sizes[i + offset] != 1 ? 0 : t.strides[i];
  }
  return arg;
}

// Whether `t` broadcasts to `sizes` without growing `sizes`.
inline bool broadcasts_to(const TensorArg& t, c10::IntArrayRef sizes) {
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const int64_t rank = static_cast<int64_t>(t.sizes.size());
  if (rank > ndim) {
    return false;
  }
  for (int64_t i = 0; i < rank; ++i) {
    if (t.sizes[i] != 1 && t.sizes[i] != sizes[i + ndim - rank]) {
      return false;
    }
  }
  return true;
}

// Whether a dimension of more than one element has stride 0 (InfiniOps
// outputs must not: several elements would be written to one place).
inline bool has_broadcast_dim(const TensorArg& t) {
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    if (t.sizes[i] > 1 && t.strides[i] == 0) {
      return true;
    }
  }
  return false;
}

inline c10::SmallVector<int64_t, 6> contiguous_strides(
    c10::ArrayRef<int64_t> sizes) {
  c10::SmallVector<int64_t, 6> strides(sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * std::max<int64_t>(sizes[i + 1], 1);
  }
  return strides;
}

inline bool same_layout(const TensorArg& a, const TensorArg& b) {
  return a.data == b.data && a.sizes == b.sizes && a.strides == b.strides;
}

// The byte range [first, last) that `t`'s elements span (empty for none).
inline std::pair<uintptr_t, uintptr_t> byte_span(const TensorArg& t) {
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  if (t.data == nullptr || numel_of(t) == 0) {
    return {base, base};
  }
  int64_t lo = 0;
  int64_t hi = 0;
  for (size_t i = 0; i < t.sizes.size(); ++i) {
    const int64_t reach = (t.sizes[i] - 1) * t.strides[i];
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t item = static_cast<int64_t>(c10::elementSize(t.dtype));
  return {base + lo * item, base + (hi + 1) * item};
}

// Whether the memory `a` and `b` reach may overlap (conservatively, by the
// byte ranges they span).
inline bool may_overlap(const TensorArg& a, const TensorArg& b) {
  const auto x = byte_span(a);
  const auto y = byte_span(b);
  return x.first < x.second && y.first < y.second && x.first < y.second &&
      y.first < x.second;
}

// InfiniOps' operator templates only know their backend implementations
// inside libinfiniops, where they are explicitly instantiated. A copy the
// compiler instantiates here (to inline it) sees none: its
// active_implementation_indices says "none", and its Call would abort. So:
// - availability comes from what the build read from libinfiniops' symbols
//   (TORCH_INFINI_OPS_<OP>_DEVICE_MASK, bit = InfiniRT Device::Type);
// - operators are made through a pointer to the library's instantiation of
//   Make, which the compiler cannot replace with an inlined local copy, and
//   run through their virtual operator(), which lives in the library.
inline bool has_implementation(irt::Device::Type type,
                               unsigned long build_mask) {
  return (build_mask >> static_cast<int>(type)) & 1UL;
}

// The reason for an ATen overload InfiniOps has no kernel for on this
// backend; `kernel` names the InfiniOps operator that would serve it, if any.
std::string no_kernel_reason(const std::string& overload,
                             const std::string& kernel,
                             const std::string& backend);

// The hint ending every refusal: how to run the call anyway.
extern const char* const kFallbackHint;

// Launches of InfiniOps operators other files reuse (defined in
// infini_kernels.cpp): each checks nothing, its caller has.
void launch_add(InfiniProvider& provider, int device, StreamHandle stream,
                const BinaryArgs& args);
void launch_cast(InfiniProvider& provider, int device, StreamHandle stream,
                 const CopyArgs& args);
// Empty when infini::ops::Add/Cast can run `args` on `provider`'s backend.
std::string add_unsupported(const InfiniProvider& provider,
                            const BinaryArgs& args);
std::string cast_unsupported(const InfiniProvider& provider,
                             const CopyArgs& args);

}  // namespace torch_infini::runtime::infini
