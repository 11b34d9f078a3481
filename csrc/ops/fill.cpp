// fill_ and zero_ on the infini device: torch.zeros/ones/full and
// nn.Module buffers reach these.

#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_infini::ops {
namespace {

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  // Checked now, on the calling thread, with the conversion the CPU kernel
  // uses (a value that overflows the dtype raises), not later on a stream.
  AT_DISPATCH_V2(self.scalar_type(), "fill_",
                 AT_WRAP([&] { (void)value.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16,
                 at::kBool, at::kComplexHalf, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 AT_EXPAND(AT_FLOAT8_TYPES));
  if (self.numel() == 0) {
    return self;
  }
  c10::DeviceGuard guard(self.device());
  const runtime::FillArgs args{arg_of(self), value};
  auto& kernels = runtime::kernels();
  if (kernels.fill_unsupported(args).empty()) {
    kernels.fill(self.device().index(),
                 current_native_stream(self.device().index()), args);
    return self;
  }
  // No fill kernel on this provider: copy a host-prepared buffer (data
  // movement, ordered on the current stream like any copy to the device).
  at::Tensor host =
      at::empty(self.sizes(), self.options().device(at::kCPU).pinned_memory(false));
  host.fill_(value);
  self.copy_(host);
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor "
              "with ", value.dim(), " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) {
  return fill_scalar(self, 0);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero_));
}

}  // namespace torch_infini::ops
