#include "ops/common.h"

#include <ATen/ops/from_blob.h>

#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"

namespace torch_infini::ops {

at::Tensor host_alias(const at::Tensor& t) {
  at::Tensor alias = at::from_blob(
      t.data_ptr(), t.sizes(), t.strides(), [keep = t.storage()](void*) {},
      t.options().device(at::kCPU));
  alias._set_conj(t.is_conj());
  alias._set_neg(t.is_neg());
  return alias;
}

runtime::TensorArg arg_of(const at::Tensor& t) {
  runtime::TensorArg arg;
  arg.data = t.numel() == 0 ? nullptr : const_cast<void*>(t.const_data_ptr());
  arg.sizes.assign(t.sizes().begin(), t.sizes().end());
  arg.strides.assign(t.strides().begin(), t.strides().end());
  arg.dtype = t.scalar_type();
  return arg;
}

runtime::TensorArg broadcast_arg(const at::Tensor& t, at::IntArrayRef sizes) {
  runtime::TensorArg arg;
  arg.data = t.numel() == 0 ? nullptr : const_cast<void*>(t.const_data_ptr());
  arg.dtype = t.scalar_type();
  const int64_t ndim = static_cast<int64_t>(sizes.size());
  const int64_t offset = ndim - t.dim();
  arg.sizes.assign(sizes.begin(), sizes.end());
  arg.strides.assign(ndim, 0);
  for (int64_t i = 0; i < t.dim(); ++i) {
    arg.strides[i + offset] = t.size(i) == 1 && sizes[i + offset] != 1
        ? 0
        : t.stride(i);
  }
  return arg;
}

runtime::StreamHandle current_native_stream(c10::DeviceIndex device) {
  return native_stream(current_stream(device));
}

std::string provider_label() {
  auto& p = runtime::provider();
  const std::string name = p.name();
  return name == "host" ? name : name + "/" + p.backend();
}

void check_supported(const char* op, const std::string& reason) {
  TORCH_CHECK_NOT_IMPLEMENTED(reason.empty(), op, " on infini (",
                              provider_label(), "): ", reason);
}

void check_same_infini_device(const char* op, const at::Tensor& a,
                              const at::Tensor& b) {
  TORCH_CHECK(a.device() == b.device(), op,
              ": expected all tensors on the same infini device, got ",
              a.device(), " and ", b.device(),
              "; move them with .to(device) first");
}

}  // namespace torch_infini::ops
