// F.rms_norm on the provider's fused RmsNorm, and the shaping of every fused
// call (ops/nn/fused.h).
//
// aten::rms_norm is CompositeImplicitAutograd: PyTorch 2.13 decomposes it on
// every device without a kernel of its own (its fused aten::_fused_rms_norm
// has CUDA, MPS and XPU kernels only, and its backward no CPU kernel). So
// the infini device takes it at AutogradPrivateUse1: a call the provider's
// RmsNorm computes as PyTorch does runs there, with its gradient composed of
// ATen operators; every other call (the host runtime included) runs
// PyTorch's own decomposition, as before.

#include <ATen/OpMathType.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/empty.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/rsqrt.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <limits>

#include "core/InfiniFunctions.h"
#include "ops/common.h"
#include "ops/nn/fused.h"
#include "ops/op_coverage.h"
#include "runtime/fused_kernels.h"

namespace torch_infini::ops {
namespace {

using runtime::FusedOp;

// A tensor the fused kernels may read: on the infini device, dense, not a
// tensor subclass, fake or functional tensor (torch.compile traces those
// through the decomposition).
bool plain_device_tensor(const at::Tensor& t) {
  if (!t.defined() || t.device().type() != kInfini || t.is_complex() ||
      t.is_nested() || t.layout() != c10::kStrided) {
    return false;
  }
  const auto keys = t.key_set();
  return !keys.has(c10::DispatchKey::Python) &&
      !keys.has(c10::DispatchKey::Functionalize) &&
      !keys.has(c10::DispatchKey::PythonTLSSnapshot);
}

// `t` with its leading dimensions flattened into one, where that is a view
// of a contiguous tensor; `t` itself where it already has `rank` dimensions.
std::optional<at::Tensor> as_rank(const at::Tensor& t, int64_t rank,
                                  int64_t min_rank) {
  if (t.dim() >= min_rank && t.dim() <= rank) {
    return t;
  }
  if (t.dim() < 1 || !t.is_contiguous()) {
    return std::nullopt;
  }
  std::vector<int64_t> sizes(t.sizes().end() - std::min<int64_t>(t.dim(), rank - 1),
                             t.sizes().end());
  sizes.insert(sizes.begin(), -1);
  return t.view(sizes);
}

// A call the provider's fused kernel accepted: its inputs as the kernel
// reads them, and its output's sizes (as returned, and as the kernel writes).
struct AcceptedCall {
  runtime::FusedArgs args;
  std::vector<at::Tensor> shaped;
  std::vector<int64_t> out_sizes;
  std::vector<int64_t> kernel_out_sizes;
};

// A contiguous tensor of `sizes` not yet allocated, for the provider's check.
runtime::TensorArg unallocated(c10::IntArrayRef sizes, c10::ScalarType dtype) {
  runtime::TensorArg arg;
  arg.sizes.assign(sizes.begin(), sizes.end());
  arg.strides.assign(sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i) {
    arg.strides[i] = arg.strides[i + 1] * std::max<int64_t>(sizes[i + 1], 1);
  }
  arg.dtype = dtype;
  return arg;
}

std::optional<AcceptedCall> accept(FusedOp op,
                                   const std::vector<at::Tensor>& inputs,
                                   float eps) {
  runtime::kernels();  // selects the provider, which installs its fused kernels
  runtime::FusedKernels* const kernels = runtime::fused_kernels();
  if (kernels == nullptr || c10::impl::TorchDispatchModeTLS::stack_len() > 0) {
    return std::nullopt;
  }
  for (const at::Tensor& t : inputs) {
    if (!plain_device_tensor(t) || t.device() != inputs.front().device() ||
        t.numel() == 0) {
      return std::nullopt;
    }
  }
  const at::Tensor& x = inputs.front();
  AcceptedCall call{{op, {}, {}, eps}, inputs, {}, {}};
  call.out_sizes.assign(x.sizes().begin(), x.sizes().end());
  switch (op) {
    case FusedOp::kRmsNorm: {
      // [rows, d] or [b, h, d] with unit stride along d, as given; others
      // flattened to [rows, d] where that is a view.
      auto rows = x.stride(-1) == 1 ? as_rank(x, 3, 2) : std::nullopt;
      if (!rows) {
        return std::nullopt;
      }
      call.shaped[0] = *rows;
      break;
    }
    case FusedOp::kSwiglu:
      break;
    case FusedOp::kSiluAndMul:
      if (x.dim() == 0 || x.size(-1) % 2 != 0) {
        return std::nullopt;
      }
      call.out_sizes.back() /= 2;
      break;
    case FusedOp::kCausalSoftmax: {
      auto rows = as_rank(x, 3, 2);
      if (!rows) {
        return std::nullopt;
      }
      call.shaped[0] = *rows;
      break;
    }
  }
  call.kernel_out_sizes = op == FusedOp::kSiluAndMul
      ? call.out_sizes
      : std::vector<int64_t>(call.shaped[0].sizes().begin(),
                             call.shaped[0].sizes().end());
  for (const at::Tensor& t : call.shaped) {
    call.args.inputs.push_back(arg_of(t));
  }
  call.args.out = unallocated(call.kernel_out_sizes, x.scalar_type());
  if (!kernels->unsupported(call.args).empty()) {
    return std::nullopt;
  }
  return call;
}

at::Tensor launch(AcceptedCall& call) {
  const at::Tensor& x = call.shaped.front();
  at::Tensor out = at::empty(call.out_sizes, x.options());
  call.args.out = arg_of(out.view(call.kernel_out_sizes));
  const c10::DeviceGuard guard(x.device());
  runtime::fused_kernels()->launch(x.device().index(),
                                   current_native_stream(x.device().index()),
                                   call.args);
  return out;
}

}  // namespace

std::optional<at::Tensor> run_fused(FusedOp op,
                                    const std::vector<at::Tensor>& inputs,
                                    float eps) {
  auto call = accept(op, inputs, eps);
  if (!call) {
    return std::nullopt;
  }
  return launch(*call);
}

std::optional<at::Tensor> run_fused_custom_op(
    const std::string& name, const std::vector<at::Tensor>& inputs) {
  FusedOp op;
  if (name == "swiglu") {
    op = FusedOp::kSwiglu;
  } else if (name == "silu_and_mul") {
    op = FusedOp::kSiluAndMul;
  } else if (name == "causal_softmax") {
    op = FusedOp::kCausalSoftmax;
  } else {
    TORCH_CHECK(false, "infini: no fused operator '", name, "'");
  }
  auto out = run_fused(op, inputs);
  if (!out) {
    coverage::served_as(c10::OperatorName("infini::" + name, ""),
                        coverage::Kind::kComposite);
  }
  return out;
}

namespace {

// F.rms_norm's gradient, composed of ATen operators (computed in float32 for
// float16/bfloat16 inputs, as PyTorch's decomposition computes the forward):
// with r = rsqrt(mean(x^2) + eps) and xhat = x * r,
//   d input  = r * (g * w - xhat * mean(g * w * xhat))
//   d weight = sum over rows of g * xhat.
class RmsNormFunction : public torch::autograd::Function<RmsNormFunction> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext* ctx,
                            const at::Tensor& input, const at::Tensor& weight,
                            double eps) {
    auto out = run_fused(FusedOp::kRmsNorm, {input, weight},
                         static_cast<float>(eps));
    TORCH_CHECK(out.has_value(), "infini: RmsNorm refused a call it had "
                "accepted");
    ctx->save_for_backward({input, weight});
    ctx->saved_data["eps"] = eps;
    return *out;
  }

  static torch::autograd::variable_list backward(
      torch::autograd::AutogradContext* ctx,
      torch::autograd::variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor& input = saved[0];
    const at::Tensor& weight = saved[1];
    const double eps = ctx->saved_data["eps"].toDouble();
    const auto opmath = at::toOpMathType(input.scalar_type());
    const at::Tensor x = input.to(opmath);
    const at::Tensor g = grads[0].to(opmath);
    const at::Tensor w = weight.to(opmath);
    const at::Tensor r =
        at::rsqrt((x * x).mean(-1, /*keepdim=*/true).add(eps));
    const at::Tensor xhat = x * r;
    const at::Tensor gw = g * w;
    at::Tensor grad_input;
    at::Tensor grad_weight;
    if (ctx->needs_input_grad(0)) {
      grad_input = (r * (gw - xhat * (gw * xhat).mean(-1, true)))
                       .to(input.scalar_type());
    }
    if (ctx->needs_input_grad(1)) {
      grad_weight = (g * xhat).reshape({-1, x.size(-1)}).sum(0).to(
          weight.scalar_type());
    }
    return {grad_input, grad_weight, at::Tensor()};
  }
};

// PyTorch's own decomposition of aten::rms_norm (its CompositeImplicitAutograd
// kernel, as Python's OpOverload.decompose() calls it), at the autograd level:
// its parts record their own gradients, exactly as without this kernel.
at::Tensor decomposed_rms_norm(const at::Tensor& input,
                               c10::SymIntArrayRef normalized_shape,
                               const std::optional<at::Tensor>& weight,
                               std::optional<double> eps) {
  static const c10::OperatorHandle op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::rms_norm", "");
  torch::jit::Stack stack{input, c10::IValue(normalized_shape), weight, eps};
  op.callBoxedForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd,
                             stack);
  return stack.back().toTensor();
}

bool provider_has_fused_kernels() {
  runtime::kernels();  // selects the provider, which installs its fused kernels
  return runtime::fused_kernels() != nullptr;
}

// Whether RmsNorm computes this call as PyTorch does (before asking the
// provider): one normalized dimension, the last, and a weight of the input's
// dtype (PyTorch itself composes a call with another weight dtype).
bool rms_norm_fusable(const at::Tensor& input,
                      c10::SymIntArrayRef normalized_shape,
                      const std::optional<at::Tensor>& weight) {
  if (normalized_shape.size() != 1 || input.dim() < 1 ||
      !weight.has_value() || !weight->defined()) {
    return false;
  }
  const auto d = normalized_shape[0].maybe_as_int();
  return d.has_value() && *d == input.size(-1) && weight->dim() == 1 &&
      weight->size(0) == *d && weight->scalar_type() == input.scalar_type() &&
      input.suggest_memory_format() == c10::MemoryFormat::Contiguous;
}

at::Tensor rms_norm(const at::Tensor& input,
                    c10::SymIntArrayRef normalized_shape,
                    const std::optional<at::Tensor>& weight,
                    std::optional<double> eps) {
  if (rms_norm_fusable(input, normalized_shape, weight) &&
      provider_has_fused_kernels()) {
    // PyTorch's default eps for the float32 arithmetic of float32, float16
    // and bfloat16 (the dtypes RmsNorm serves).
    const double e =
        eps.value_or(std::numeric_limits<float>::epsilon());
    // Asked first without launching, so that a refused call composes.
    if (accept(FusedOp::kRmsNorm, {input, *weight}, static_cast<float>(e))) {
      coverage::served_as(c10::OperatorName("aten::rms_norm", ""),
                          coverage::Kind::kNative);
      return RmsNormFunction::apply(input, *weight, e);
    }
  }
  return decomposed_rms_norm(input, normalized_shape, weight, eps);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, AutogradPrivateUse1, m) {
  m.impl("rms_norm", TORCH_FN(rms_norm));
}

}  // namespace torch_infini::ops
