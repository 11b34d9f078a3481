// The entry points PyTorch calls for a PrivateUse1 device where CPU and CUDA
// have kernels of their own: convolution_overrideable and its backward.
// They run as the device-generic operators CPU runs (aten::convolution,
// aten::convolution_backward) through the generic kernel, so every
// convolution (1-3d, transposed, grouped, dilated) is CPU's, and on
// providers without CPU kernels they reach the opt-in CPU fallback.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "ops/aten_kernel.h"

namespace torch_infini::ops {
namespace {

// convolution_overrideable has convolution's arguments, in its order.
void convolution(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::convolution", "");
  run_family_kernel(op, stack);
}

// convolution_backward takes bias_sizes (after weight), which its
// overrideable twin leaves out: the bias has one value per output channel.
void convolution_backward(const c10::OperatorHandle&,
                          torch::jit::Stack* stack) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
      "aten::convolution_backward", "");
  constexpr size_t kArgs = 10;  // convolution_backward_overrideable's
  const auto begin = stack->end() - kArgs;
  const at::Tensor& weight = begin[2].toTensor();
  const bool transposed = begin[6].toBool();
  const int64_t groups = begin[8].toInt();
  const int64_t channels =
      transposed ? weight.size(1) * groups : weight.size(0);
  stack->insert(begin + 3, c10::IValue(std::vector<int64_t>{channels}));
  run_family_kernel(op, stack);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution>());
  m.impl("convolution_backward_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution_backward>());
}

}  // namespace torch_infini::ops
