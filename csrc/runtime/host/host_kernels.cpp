// Kernels of the built-in host runtime: CPU ATen kernels run on a stream's
// worker over aliases of device memory. This makes the host runtime the
// numerical oracle by construction; what it proves is the plumbing (layouts,
// lifetimes, ordering).

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>

#include "runtime/host/host_provider.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::host {
namespace {

// A CPU tensor over device memory; valid only on the worker, while the
// allocator keeps the memory alive for the stream's queued work.
at::Tensor alias(const TensorArg& t) {
  return at::from_blob(t.data, t.sizes, t.strides,
                       at::TensorOptions().dtype(t.dtype).device(at::kCPU));
}

class HostKernels final : public OpKernels {
 public:
  explicit HostKernels(HostProvider& provider) : provider_(provider) {
    using c10::ScalarType;
    support_.push_back(OpSupport{
        "aten::add.Tensor",
        {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16,
         ScalarType::Double, ScalarType::Char, ScalarType::Short,
         ScalarType::Int, ScalarType::Long, ScalarType::Byte},
        /*alpha=*/true,
        /*broadcast=*/true,
        /*strided=*/true,
        "ATen CPU kernel on the stream's worker"});
    support_.push_back(OpSupport{
        "aten::copy_ (strided or converting, on device)",
        {ScalarType::Float, ScalarType::Half, ScalarType::BFloat16,
         ScalarType::Double, ScalarType::Char, ScalarType::Short,
         ScalarType::Int, ScalarType::Long, ScalarType::Byte,
         ScalarType::Bool},
        /*alpha=*/false,
        /*broadcast=*/true,
        /*strided=*/true,
        "ATen CPU kernel on the stream's worker"});
  }

  const std::vector<OpSupport>& support() const override { return support_; }

  std::string add_unsupported(const AddArgs& args) const override {
    const auto& dtypes = support_.front().dtypes;
    if (std::find(dtypes.begin(), dtypes.end(), args.out.dtype) ==
        dtypes.end()) {
      return "dtype " + std::string(c10::getDtypeNames(args.out.dtype).first) +
          " is not supported (supported: float32, float16, bfloat16, "
          "float64, int8, int16, int32, int64, uint8)";
    }
    return {};
  }

  std::string copy_unsupported(const CopyArgs& /*args*/) const override {
    return {};
  }

  void copy(int device, StreamHandle stream, const CopyArgs& args) override {
    provider_.stream(device, stream).enqueue([args] {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      at::Tensor dst = alias(args.dst);
      dst.copy_(alias(args.src));
    });
  }

  void add(int device, StreamHandle stream, const AddArgs& args) override {
    provider_.stream(device, stream).enqueue([args] {
      // Plain CPU compute: skip autograd and view tracking on the worker.
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      at::Tensor out = alias(args.out);
      at::add_out(out, alias(args.self), alias(args.other), args.alpha);
    });
  }

 private:
  HostProvider& provider_;
  std::vector<OpSupport> support_;
};

}  // namespace

std::unique_ptr<OpKernels> make_host_kernels(HostProvider& provider) {
  return std::make_unique<HostKernels>(provider);
}

}  // namespace torch_infini::runtime::host
