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

// The CPU view of one argument of an ATen call: device tensors become
// aliases of their memory (made now, read only on the worker); everything
// else, CPU 0-dim scalars included, is passed as is.
c10::IValue alias_value(const c10::IValue& value) {
  const auto alias_tensor = [](const at::Tensor& t) {
    if (!t.defined() || t.device().is_cpu()) {
      return t;
    }
    return at::from_blob(t.numel() == 0 ? nullptr : t.data_ptr(), t.sizes(),
                         t.strides(), t.options().device(at::kCPU));
  };
  if (value.isTensor()) {
    return alias_tensor(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> list;
    list.reserve(value.toTensorList().size());
    for (const at::Tensor& t : value.toTensorList()) {
      list.push_back(alias_tensor(t));
    }
    return list;
  }
  return value;
}

template <typename T>
void add_contiguous(const TensorArg& a, const TensorArg& b, const TensorArg& out,
                    int64_t n) {
  const T* x = static_cast<const T*>(a.data);
  const T* y = static_cast<const T*>(b.data);
  T* z = static_cast<T*>(out.data);
  for (int64_t i = 0; i < n; ++i) {
    z[i] = x[i] + y[i];
  }
}

// Small, dense, alpha == 1 adds of these dtypes: an element loop gives
// exactly ATen's result (one rounding of a + b) without building three alias
// tensors and a TensorIterator per task, which dominate a small add.
bool add_small_dense(const AddArgs& args) {
  constexpr int64_t kSmall = 4096;
  if (!args.alpha.equal(1) || !is_contiguous(args.self) ||
      !is_contiguous(args.other) || !is_contiguous(args.out)) {
    return false;
  }
  const int64_t n = numel_of(args.out);
  if (n > kSmall) {
    return false;
  }
  switch (args.out.dtype) {
    case c10::ScalarType::Float:
      add_contiguous<float>(args.self, args.other, args.out, n);
      return true;
    case c10::ScalarType::Double:
      add_contiguous<double>(args.self, args.other, args.out, n);
      return true;
    case c10::ScalarType::Int:
      add_contiguous<int32_t>(args.self, args.other, args.out, n);
      return true;
    case c10::ScalarType::Long:
      add_contiguous<int64_t>(args.self, args.other, args.out, n);
      return true;
    default:
      return false;
  }
}

class HostKernels final : public OpKernels {
 public:
  explicit HostKernels(HostProvider& provider) : provider_(provider) {
    support_.push_back(OpSupport{
        "aten::add.Tensor",
        numeric_dtypes(/*with_bool=*/false),
        /*alpha=*/true,
        /*broadcast=*/true,
        /*strided=*/true,
        "ATen CPU kernel on the stream's worker"});
    support_.push_back(OpSupport{
        "aten::fill_.Scalar (and zero_, fill_.Tensor)",
        numeric_dtypes(/*with_bool=*/true),
        /*alpha=*/false,
        /*broadcast=*/false,
        /*strided=*/true,
        "ATen CPU kernel on the stream's worker"});
    support_.push_back(OpSupport{
        "aten::copy_ (strided or converting, on device)",
        numeric_dtypes(/*with_bool=*/true),
        /*alpha=*/false,
        /*broadcast=*/true,
        /*strided=*/true,
        "ATen CPU kernel on the stream's worker"});
    for (const auto& family : aten_op_families()) {
      support_.push_back(family_support(
          family, family.dtypes, "ATen CPU kernels on the stream's worker"));
    }
  }

  const std::vector<OpSupport>& support() const override { return support_; }

  std::string aten_unsupported(const AtenCall& /*call*/) const override {
    return {};  // ATen's CPU kernels run every call the ops layer accepts
  }

  void aten(int device, StreamHandle stream, AtenCall call) override {
    torch::jit::Stack args;
    args.reserve(call.args.size());
    for (const c10::IValue& value : call.args) {
      args.push_back(alias_value(value));
    }
    std::vector<at::Tensor> results_into;
    for (const at::Tensor& t : call.results_into) {
      results_into.push_back(alias_value(t).toTensor());
    }
    provider_.stream(device, stream)
        .enqueue([op = call.op, args = std::move(args),
                  results_into = std::move(results_into)]() mutable {
          at::AutoDispatchBelowADInplaceOrView below_autograd;
          op.callBoxed(args);
          // A functional overload leaves its results on the stack.
          for (size_t i = 0; i < results_into.size(); ++i) {
            if (results_into[i].defined()) {
              results_into[i].copy_(args[i].toTensor());
            }
          }
        });
  }

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

  std::string fill_unsupported(const FillArgs& /*args*/) const override {
    return {};
  }

  void fill(int device, StreamHandle stream, const FillArgs& args) override {
    provider_.stream(device, stream).enqueue([args] {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      alias(args.self).fill_(args.value);
    });
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
      if (add_small_dense(args)) {
        return;
      }
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
