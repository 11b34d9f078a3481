// The entry points PyTorch calls for a PrivateUse1 device where CPU and CUDA
// have kernels of their own:
//   - convolution_overrideable and its backward. They run as the
//     device-generic operators CPU runs (aten::convolution,
//     aten::convolution_backward) through the generic kernel, so every
//     convolution (1-3d, transposed, grouped, dilated) is CPU's, and on
//     providers without CPU kernels they reach the opt-in CPU fallback;
//   - the choice of scaled_dot_product_attention's backend.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <ATen/ops/_fused_sdp_choice_native.h>
#include <torch/library.h>

#include "ops/aten/aten_kernel.h"
#include "runtime/kernels.h"

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

// scaled_dot_product_attention's backend. Where the provider has CPU's
// fused flash attention kernel (the host runtime), the one CPU would choose
// (under the same constraints and torch.backends flags): one kernel forward
// and one backward, where the math backend is a dozen, and the results CPU
// gives. Elsewhere the math backend, whose matmuls and softmax the Infini
// stack maps.
int64_t sdp_choice(const at::Tensor& query, const at::Tensor& key,
                   const at::Tensor& value,
                   const std::optional<at::Tensor>& attn_mask,
                   double dropout_p, bool is_causal,
                   std::optional<double> scale, bool enable_gqa) {
  static const bool flash_served = runtime::kernels().has_kernel(
      c10::Dispatcher::singleton().findSchemaOrThrow(
          "aten::_scaled_dot_product_flash_attention_for_cpu", ""));
  if (!flash_served) {
    return static_cast<int64_t>(sdp::SDPBackend::math);
  }
  return at::native::_fused_sdp_choice_cpp(query, key, value, attn_mask,
                                           dropout_p, is_causal, scale,
                                           enable_gqa);
}

}  // namespace

}  // namespace torch_infini::ops

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub,
                              &torch_infini::ops::sdp_choice)
}  // namespace at::native

namespace torch_infini::ops {

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution>());
  m.impl("convolution_backward_overrideable",
         torch::CppFunction::makeFromBoxedFunction<&convolution_backward>());
}

}  // namespace torch_infini::ops
