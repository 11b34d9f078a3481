// _native_batch_norm_legit and _batch_norm_with_update are native_batch_norm
// by other names: CPU's kernels of all three are one (batch_norm_cpu), bit
// for bit, and update the running statistics alike. torch.compile, export
// and functionalized programs call them where eager code calls
// native_batch_norm; InfiniOps has an operator of native_batch_norm only,
// and their writes to the running statistics keep them from decomposing.
// So both run as native_batch_norm through the generic kernel, on every
// provider (the host runtime runs CPU's native_batch_norm, the same kernel).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include "ops/aten/aten_kernel.h"

namespace torch_infini::ops {
namespace {

const c10::OperatorHandle& native_batch_norm() {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
      "aten::native_batch_norm", "");
  return op;
}

// (input, weight, bias, running_mean, running_var, training, momentum, eps):
// native_batch_norm's arguments, in its order.
void native_batch_norm_legit(const c10::OperatorHandle&,
                             torch::jit::Stack* stack) {
  run_family_kernel(native_batch_norm(), stack);
}

// (input, weight, bias, running_mean, running_var, momentum, eps): training
// always, and a fourth result, the reserve CPU leaves empty (uint8).
void batch_norm_with_update(const c10::OperatorHandle&,
                            torch::jit::Stack* stack) {
  constexpr size_t kArgs = 7;
  const auto begin = stack->end() - kArgs;
  const at::Tensor input = begin[0].toTensor();
  stack->insert(begin + 5, c10::IValue(true));
  run_family_kernel(native_batch_norm(), stack);
  stack->push_back(at::empty({0}, input.options().dtype(at::kByte)));
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_native_batch_norm_legit",
         torch::CppFunction::makeFromBoxedFunction<&native_batch_norm_legit>());
  m.impl("_batch_norm_with_update",
         torch::CppFunction::makeFromBoxedFunction<&batch_norm_with_update>());
}

}  // namespace torch_infini::ops
