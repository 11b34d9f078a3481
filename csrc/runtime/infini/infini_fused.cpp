// InfiniOps' fused operators with no ATen operator of their own: RmsNorm
// (F.rms_norm), Swiglu, SiluAndMul and CausalSoftmax (torch.ops.infini.*).
// ops/nn/fused.cpp decides when a call is one of them and shapes it; this file
// checks what InfiniOps would assert on or compute otherwise than PyTorch,
// and launches.
//
// Served dtypes, from the kernels' code (CPU backend, both pins):
// - RmsNorm and CausalSoftmax accumulate in float32 whatever the dtype, so
//   float64 is not served (PyTorch computes it in float64); float32, float16
//   and bfloat16 are, within PyTorch's tolerance for the dtype (one rounding
//   to float16/bfloat16 at the end, toward zero for float16; CausalSoftmax
//   rounds its exponentials to the dtype before dividing);
// - Swiglu and SiluAndMul compute in float32 for float16/bfloat16 and in the
//   dtype otherwise: all four floating dtypes.
// SiluAndMul is InfiniOps 1f6f9c2 and newer; where it is missing, Swiglu
// computes it over the two halves of the input (the same arithmetic).

// Swiglu and CausalSoftmax are marked deprecated in InfiniOps 1f6f9c2.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#include <algorithm>
#include <string>

#include "runtime/infini/infini_common.h"
#include "runtime/infini/infini_fused.h"
#include "runtime/infini/operator_cache.h"

namespace torch_infini::runtime::infini {
namespace {

#ifndef TORCH_INFINI_OPS_RMSNORM_DEVICE_MASK
#define TORCH_INFINI_OPS_RMSNORM_DEVICE_MASK 0
#endif
#ifndef TORCH_INFINI_OPS_SWIGLU_DEVICE_MASK
#define TORCH_INFINI_OPS_SWIGLU_DEVICE_MASK 0
#endif
#ifndef TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK
#define TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK 0
#endif
#ifndef TORCH_INFINI_OPS_CAUSALSOFTMAX_DEVICE_MASK
#define TORCH_INFINI_OPS_CAUSALSOFTMAX_DEVICE_MASK 0
#endif

#if TORCH_INFINI_OPS_RMSNORM_DEVICE_MASK
using RmsNormOperator = iops::Operator<iops::RmsNorm>;
using RmsNormMake = std::unique_ptr<RmsNormOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const float&, const iops::Tensor&);
RmsNormMake volatile rms_norm_make =
    &RmsNormOperator::Make<const iops::Tensor&, const float&,
                           const iops::Tensor&>;
#endif
#if TORCH_INFINI_OPS_SWIGLU_DEVICE_MASK
using SwigluOperator = iops::Operator<iops::Swiglu>;
using SwigluMake = std::unique_ptr<SwigluOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&,
    const iops::Tensor&);
SwigluMake volatile swiglu_make =
    &SwigluOperator::Make<const iops::Tensor&, const iops::Tensor&>;
#endif
#if TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK
using SiluAndMulOperator = iops::Operator<iops::SiluAndMul>;
using SiluAndMulMake = std::unique_ptr<SiluAndMulOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&);
SiluAndMulMake volatile silu_and_mul_make =
    &SiluAndMulOperator::Make<const iops::Tensor&>;
#endif
#if TORCH_INFINI_OPS_CAUSALSOFTMAX_DEVICE_MASK
using CausalSoftmaxOperator = iops::Operator<iops::CausalSoftmax>;
using CausalSoftmaxMake = std::unique_ptr<CausalSoftmaxOperator> (*)(
    const iops::Config&, const iops::Tensor, const iops::Tensor&);
CausalSoftmaxMake volatile causal_softmax_make =
    &CausalSoftmaxOperator::Make<const iops::Tensor&>;
#endif

unsigned long mask_of(FusedOp op) {
  switch (op) {
    case FusedOp::kRmsNorm: return TORCH_INFINI_OPS_RMSNORM_DEVICE_MASK;
    case FusedOp::kSwiglu: return TORCH_INFINI_OPS_SWIGLU_DEVICE_MASK;
    case FusedOp::kSiluAndMul: return TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK;
    case FusedOp::kCausalSoftmax:
      return TORCH_INFINI_OPS_CAUSALSOFTMAX_DEVICE_MASK;
  }
  return 0;
}

bool served_dtype(FusedOp op, c10::ScalarType t) {
  using c10::ScalarType;
  const bool reduced = t == ScalarType::Half || t == ScalarType::BFloat16;
  if (op == FusedOp::kRmsNorm || op == FusedOp::kCausalSoftmax) {
    return t == ScalarType::Float || reduced;  // float32 accumulation
  }
  return t == ScalarType::Float || t == ScalarType::Double || reduced;
}

// SiluAndMul on Swiglu: the halves of x as Swiglu's input (x[..., d:]) and
// gate (x[..., :d]), of out's shape.
void halves(const TensorArg& x, const TensorArg& out, TensorArg* up,
            TensorArg* gate) {
  *gate = x;
  gate->sizes = out.sizes;
  *up = *gate;
  const int64_t d = out.sizes.back();
  up->data = static_cast<char*>(x.data) +
      d * x.strides.back() * static_cast<int64_t>(c10::elementSize(x.dtype));
}

template <typename Op, typename Make, typename Launch, typename... Tensors>
void launch(InfiniProvider& provider, int device, StreamHandle stream,
            Make make, Launch run, const TensorArg& out,
            const Tensors&... args) {
  using Operator = iops::Operator<Op>;
  provider.bind(device);
  const irt::Device where(provider.device_type(), device);
  const SerialOpenMPScope serial(serial_launch(provider, out));
  OperatorKey key;
  key.words.push_back(device);
  key.words.push_back(static_cast<int64_t>(out.dtype));
  (append_layout(key, args), ...);
  thread_local OperatorCache<Operator> cache;
  Operator& op = cache.get(std::move(key), [&] { return make(where); });
  op.set_stream(stream);
  run(static_cast<const Op&>(op), where);
}

}  // namespace

bool fused_kernel_present(const InfiniProvider& provider, FusedOp op) {
  const auto type = provider.device_type();
  if (op == FusedOp::kSiluAndMul &&
      !has_implementation(type, TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK)) {
    return has_implementation(type, TORCH_INFINI_OPS_SWIGLU_DEVICE_MASK);
  }
  return has_implementation(type, mask_of(op));
}

std::string fused_unsupported(const InfiniProvider& provider,
                              const FusedArgs& args) {
  const std::string kernel =
      std::string("infini::ops::") + fused_op_name(args.op);
  if (!fused_kernel_present(provider, args.op)) {
    return "InfiniOps has no " + kernel + " implementation for " +
        provider.backend() + " in this build";
  }
  const TensorArg& out = args.out;
  if (!served_dtype(args.op, out.dtype)) {
    return kernel + " is not served for " + dtype_name(out.dtype);
  }
  for (const TensorArg& input : args.inputs) {
    if (input.dtype != out.dtype) {
      return kernel + " needs one dtype for its inputs and output";
    }
  }
  const TensorArg& x = args.inputs.at(0);
  const size_t rank = out.sizes.size();
  switch (args.op) {
    case FusedOp::kRmsNorm: {
      const TensorArg& weight = args.inputs.at(1);
      // It reads rows with unit stride, and a weight of d elements.
      if ((rank != 2 && rank != 3) || x.sizes != out.sizes ||
          x.strides.back() != 1 || !is_contiguous(out)) {
        return kernel + " needs a [rows, d] or [b, h, d] input with unit "
               "stride along d";
      }
      if (weight.sizes.size() != 1 || weight.sizes[0] != out.sizes.back() ||
          (weight.sizes[0] > 1 && weight.strides[0] != 1)) {
        return kernel + " needs a contiguous weight of the last dimension's "
               "size";
      }
      return {};
    }
    case FusedOp::kSwiglu:
      if (x.sizes != out.sizes || args.inputs.at(1).sizes != out.sizes) {
        return kernel + " needs input and gate of the output's shape";
      }
      return {};
    case FusedOp::kSiluAndMul:
      if (rank == 0 || x.sizes.size() != rank ||
          x.sizes.back() != 2 * out.sizes.back() ||
          !std::equal(out.sizes.begin(), out.sizes.end() - 1,
                      x.sizes.begin())) {
        return kernel + " needs an input [..., 2d] for an output [..., d]";
      }
      return {};
    case FusedOp::kCausalSoftmax:
      if ((rank != 2 && rank != 3) || x.sizes != out.sizes ||
          out.sizes[rank - 2] > out.sizes[rank - 1]) {
        return kernel + " needs a [(b,) seq, total] input with seq <= total";
      }
      return {};
  }
  return kernel + " is not known";
}

void launch_fused(InfiniProvider& provider, int device, StreamHandle stream,
                  const FusedArgs& args) {
  const TensorArg& out = args.out;
  const TensorArg& x = args.inputs.at(0);
  switch (args.op) {
    case FusedOp::kRmsNorm: {
#if TORCH_INFINI_OPS_RMSNORM_DEVICE_MASK
      const TensorArg& w = args.inputs.at(1);
      const float eps = args.eps;
      launch<iops::RmsNorm>(
          provider, device, stream,
          [&](const irt::Device& where) {
            return rms_norm_make(iops::Config(), view_of(x, where),
                                 view_of(w, where), eps, view_of(out, where));
          },
          [&](const iops::RmsNorm& op, const irt::Device& where) {
            op(view_of(x, where), view_of(w, where), eps, view_of(out, where));
          },
          out, x, w, out);
      return;
#else
      break;
#endif
    }
    case FusedOp::kSwiglu: {
#if TORCH_INFINI_OPS_SWIGLU_DEVICE_MASK
      const TensorArg& gate = args.inputs.at(1);
      launch<iops::Swiglu>(
          provider, device, stream,
          [&](const irt::Device& where) {
            return swiglu_make(iops::Config(), view_of(x, where),
                               view_of(gate, where), view_of(out, where));
          },
          [&](const iops::Swiglu& op, const irt::Device& where) {
            op(view_of(x, where), view_of(gate, where), view_of(out, where));
          },
          out, x, gate, out);
      return;
#else
      break;
#endif
    }
    case FusedOp::kSiluAndMul: {
#if TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK
      if (has_implementation(provider.device_type(),
                             TORCH_INFINI_OPS_SILUANDMUL_DEVICE_MASK)) {
        launch<iops::SiluAndMul>(
            provider, device, stream,
            [&](const irt::Device& where) {
              return silu_and_mul_make(iops::Config(), view_of(x, where),
                                       view_of(out, where));
            },
            [&](const iops::SiluAndMul& op, const irt::Device& where) {
              op(view_of(x, where), view_of(out, where));
            },
            out, x, out);
        return;
      }
#endif
      FusedArgs swiglu{FusedOp::kSwiglu, {}, out, 0.0f};
      TensorArg up, gate;
      halves(x, out, &up, &gate);
      swiglu.inputs = {up, gate};
      launch_fused(provider, device, stream, swiglu);
      return;
    }
    case FusedOp::kCausalSoftmax: {
#if TORCH_INFINI_OPS_CAUSALSOFTMAX_DEVICE_MASK
      launch<iops::CausalSoftmax>(
          provider, device, stream,
          [&](const irt::Device& where) {
            return causal_softmax_make(iops::Config(), view_of(x, where),
                                       view_of(out, where));
          },
          [&](const iops::CausalSoftmax& op, const irt::Device& where) {
            op(view_of(x, where), view_of(out, where));
          },
          out, x, out);
      return;
#else
      break;
#endif
    }
  }
  TORCH_CHECK(false, "infini: InfiniOps has no ", fused_op_name(args.op),
              " in this build");
}

}  // namespace torch_infini::runtime::infini
