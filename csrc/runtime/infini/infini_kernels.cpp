// Kernels of the Infini stack provider: InfiniOps operators.
//
// InfiniOps asserts (aborts the process) on input it cannot run, so every
// launch is preceded by a check of everything it would reject: dtype, an
// implementation for the selected backend, and argument limits.

#include <infini/ops.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/infini/infini_provider.h"
#include "runtime/infini/operator_cache.h"
#include "runtime/kernels.h"

// OpenMP, weakly: present when InfiniOps' CPU backend was built with it (and
// PyTorch's libgomp is loaded anyway); absent symbols simply disable the scope.
extern "C" {
int omp_get_max_threads(void) __attribute__((weak));
void omp_set_num_threads(int) __attribute__((weak));
}

namespace torch_infini::runtime::infini {
namespace {

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

int64_t numel_of(const TensorArg& t) {
  int64_t n = 1;
  for (int64_t s : t.sizes) {
    n *= s;
  }
  return n;
}

namespace iops = ::infini::ops;
namespace irt = ::infini::rt;

bool to_infini_dtype(c10::ScalarType t, irt::DataType* out) {
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

iops::Tensor view_of(const TensorArg& t, irt::DataType dtype,
                     const irt::Device& device) {
  iops::Tensor::Shape shape(t.sizes.begin(), t.sizes.end());
  iops::Tensor::Strides strides(t.strides.begin(), t.strides.end());
  return iops::Tensor(t.data, shape, dtype, device, strides);
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
bool has_implementation(irt::Device::Type type, unsigned long build_mask) {
  return (build_mask >> static_cast<int>(type)) & 1UL;
}

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

class InfiniKernels final : public OpKernels {
 public:
  explicit InfiniKernels(InfiniProvider& provider) : provider_(provider) {
    // InfiniOps' elementwise kernels cover its AllTypes (floating and integer
    // types); whether Add has an implementation on the selected backend is
    // asked of InfiniOps itself.
    add_has_impl_ = has_implementation(provider.device_type(),
                                       TORCH_INFINI_OPS_ADD_DEVICE_MASK);
    if (add_has_impl_) {
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
    // InfiniOps has no fill: the ops layer copies a host-prepared buffer.
    support_.push_back(OpSupport{
        "aten::fill_.Scalar (and zero_, fill_.Tensor)",
        numeric_dtypes(/*with_bool=*/true),
        /*alpha=*/false,
        /*broadcast=*/false,
        /*strided=*/true,
        "host-prepared buffer copied with InfiniRT Memcpy (no InfiniOps "
        "fill)"});
  }

  const std::vector<OpSupport>& support() const override { return support_; }

  std::string add_unsupported(const AddArgs& args) const override {
    if (!add_has_impl_) {
      return "InfiniOps has no Add implementation for InfiniRT backend '" +
          provider_.backend() + "'";
    }
    irt::DataType dtype;
    if (!to_infini_dtype(args.out.dtype, &dtype)) {
      return "dtype " + std::string(c10::getDtypeNames(args.out.dtype).first) +
          " is not supported by infini::ops::Add (supported: float32, "
          "float16, bfloat16, float64, int8, int16, int32, int64, uint8)";
    }
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
    // InfiniOps takes alpha as a double: integers beyond 2^53 would round.
    if (args.alpha.isIntegral(false) &&
        std::abs(args.alpha.toLong()) > (int64_t{1} << 53)) {
      return "alpha " + std::to_string(args.alpha.toLong()) +
          " is not exactly representable as the double InfiniOps' Add "
          "takes";
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

  void add(int device, StreamHandle stream, const AddArgs& args) override {
    provider_.bind(device);
    irt::DataType dtype;
    to_infini_dtype(args.out.dtype, &dtype);
    const irt::Device where(provider_.device_type(), device);
    const iops::Tensor self = view_of(args.self, dtype, where);
    const iops::Tensor other = view_of(args.other, dtype, where);
    const iops::Tensor out = view_of(args.out, dtype, where);
    const SerialOpenMPScope serial(provider_.device_type() ==
                                       irt::Device::Type::kCpu &&
                                   numel_of(args.out) < kSerialBelowElements);
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
    const double alpha = args.alpha.toDouble();
#endif
    // Implementation index 0, one operator object per layout and thread.
    OperatorKey key;
    key.words.push_back(device);
    key.words.push_back(static_cast<int64_t>(args.out.dtype));
    append_layout(key, args.self);
    append_layout(key, args.other);
    append_layout(key, args.out);
    thread_local OperatorCache<AddOperator> cache;
    AddOperator& op = cache.get(std::move(key), [&] {
      const iops::Config config;
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
      return add_make(config, self, other, alpha, out);
#else
      return add_make(config, self, other, out);
#endif
    });
    op.set_stream(stream);
    const auto& add = static_cast<const iops::Add&>(op);
#ifdef TORCH_INFINI_OPS_ADD_HAS_ALPHA
    add(self, other, alpha, out);
#else
    add(self, other, out);
#endif
  }

  std::string copy_unsupported(const CopyArgs& /*args*/) const override {
    return "strided or dtype-converting copies on the device have no "
           "InfiniOps kernel in this build";
  }

  std::string fill_unsupported(const FillArgs& /*args*/) const override {
    return "InfiniOps has no fill kernel in this build";
  }

  std::string aten_unsupported(const AtenCall& /*call*/) const override {
    return "no InfiniOps kernel serves it in this build (`python -m "
           "torch_infini --ops` lists what does); turn on the CPU fallback "
           "(torch_infini.fallback.enable()) or use the host runtime "
           "(TORCH_INFINI_PROVIDER=host)";
  }

  void aten(int, StreamHandle, AtenCall call) override {
    TORCH_CHECK(false, "infini: no InfiniOps kernel for ",
                call.op.operator_name());
  }

  void fill(int, StreamHandle, const FillArgs&) override {
    TORCH_CHECK(false, "infini: device fill kernel is not available");
  }

  void copy(int, StreamHandle, const CopyArgs&) override {
    TORCH_CHECK(false, "infini: device copy kernel is not available");
  }

 private:
  InfiniProvider& provider_;
  bool add_has_impl_ = false;
  std::vector<OpSupport> support_;
};

}  // namespace

std::unique_ptr<OpKernels> make_infini_kernels(InfiniProvider& provider) {
  return std::make_unique<InfiniKernels>(provider);
}

}  // namespace torch_infini::runtime::infini
