// aten::_softmax and aten::_log_softmax on the infini device: one table
// entry each, served by the provider's row-wise kernel
// (runtime::OpKernels::rowwise) without the generic kernel's boxed call.
// torch.softmax, F.softmax and nn.Softmax arrive here as _softmax
// (softmax.int is CompositeImplicitAutograd), as log_softmax does.
//
// CPU lays the result out contiguous, of the input's sizes and dtype, and
// wraps `dim` with maybe_wrap_dim (its IndexError and message). The table
// takes a contiguous floating-point input without half_to_float (a CUDA-only
// path of softmax.int); any other call, a provider without the kernel, and
// every call under TORCH_INFINI_ENFORCE_BACKEND go to the generic kernel of
// the overload, as any other operator.

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/WrapDimMinimal.h>
#include <torch/library.h>

#include "ops/aten/aten_kernel.h"
#include "ops/aten/backend_policy.h"
#include "ops/common.h"

namespace torch_infini::ops {
namespace {

using runtime::RowwiseOp;

template <RowwiseOp kOp>
const c10::OperatorHandle& functional_overload() {
  static const c10::OperatorHandle handle =
      c10::Dispatcher::singleton().findSchemaOrThrow(
          kOp == RowwiseOp::kSoftmax ? "aten::_softmax" : "aten::_log_softmax",
          "");
  return handle;
}

bool for_table(RowwiseOp op, const at::Tensor& self, bool half_to_float) {
  const c10::ScalarType dtype = self.scalar_type();
  return !half_to_float && self.is_contiguous() && !self.is_neg() &&
      self.numel() > 0 &&
      (dtype == c10::ScalarType::Float || dtype == c10::ScalarType::Double ||
       dtype == c10::ScalarType::Half || dtype == c10::ScalarType::BFloat16) &&
      runtime::kernels().has_rowwise(op) && !backend_policy::active();
}

template <RowwiseOp kOp>
at::Tensor rowwise(const at::Tensor& self, int64_t dim, bool half_to_float) {
  if (!for_table(kOp, self, half_to_float)) {
    torch::jit::Stack stack{self, dim, half_to_float};
    run_family_kernel(functional_overload<kOp>(), &stack);
    return stack.back().toTensor();
  }
  const int64_t wrapped = c10::maybe_wrap_dim(dim, self.dim());
  c10::DeviceGuard guard(self.device());
  at::Tensor out = empty_on_current_device(self.sizes(), self.scalar_type());
  const int device = out.device().index();
  runtime::kernels().rowwise(
      device, current_native_stream(device),
      runtime::RowwiseArgs{arg_of(self), arg_of(out), wrapped, kOp});
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_softmax", TORCH_FN(rowwise<RowwiseOp::kSoftmax>));
  m.impl("_log_softmax", TORCH_FN(rowwise<RowwiseOp::kLogSoftmax>));
}

}  // namespace torch_infini::ops
