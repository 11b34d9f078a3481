// torch.autocast("infini"): the AutocastPrivateUse1 kernels, with CUDA's op
// policy. PyTorch publishes CUDA's policy as op lists in
// ATen/autocast_mode.h (AT_FORALL_*), "so that other backends can reuse" it;
// registering the same lists here keeps infini's policy equal to CUDA's in
// every PyTorch version we build against:
//
//   lower_precision_fp   matmul-like ops and convolutions run in the autocast
//                        dtype (float16 or bfloat16);
//   fp32                 ops that need range or precision (exp, log, pow,
//                        norms, losses, ...) run in float32;
//   fp32_set_opt_dtype   reductions and softmax get dtype=float32 unless the
//                        caller passed a dtype;
//   fp32_append_dtype    norm, redispatched with a float32 dtype;
//   promote              mixed-dtype inputs are cast to the widest type;
//   everything else      falls through: runs in the dtype of its inputs.
//
// binary_cross_entropy is refused, as on CUDA. Autocast only casts the
// inputs and redispatches: the kernels that then run are the device's own.

#include <ATen/autocast_mode.h>
#include <torch/library.h>

#include "core/TorchVersion.h"

namespace torch_infini::amp {
namespace {

at::Tensor binary_cross_entropy_refused(const at::Tensor&, const at::Tensor&,
                                        const std::optional<at::Tensor>&,
                                        int64_t) {
  TORCH_CHECK(
      false,
      "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are "
      "unsafe to autocast (as on CUDA): a sigmoid in low precision before "
      "them loses the probabilities' tails. Combine the two layers with "
      "torch.nn.functional.binary_cross_entropy_with_logits or "
      "torch.nn.BCEWithLogitsLoss, which are safe to autocast.");
}

// PyTorch's list of redispatch signatures names these unqualified
// (DimnameList: norm.names_ScalarOpt_dim_dtype, in the list up to 2.12;
// 2.13 has neither the overload nor at::DimnameList).
#if !TORCH_INFINI_TORCH_AT_LEAST(2, 13)
using at::DimnameList;
#endif
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

}  // namespace

// Everything without a policy runs as it is.
TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define INFINI_LOWER_PRECISION_FP(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(INFINI_LOWER_PRECISION_FP)
#undef INFINI_LOWER_PRECISION_FP

#define INFINI_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(INFINI_FP32)
#undef INFINI_FP32

#define INFINI_FP32_SET_OPT_DTYPE(...) \
  KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(INFINI_FP32_SET_OPT_DTYPE)
#undef INFINI_FP32_SET_OPT_DTYPE

  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(
      KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE)

#define INFINI_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(INFINI_PROMOTE)
#undef INFINI_PROMOTE

#if TORCH_INFINI_TORCH_AT_LEAST(2, 14)
  // CUDA registers this one outside the lists above (PyTorch 2.14), in
  // float32: a float16 input gives a float32 result under CUDA's autocast.
  KERNEL_PRIVATEUSEONE(linalg_matrix_sqrth, fp32)
#endif

  m.impl("aten::binary_cross_entropy",
         TORCH_FN(binary_cross_entropy_refused));
}

}  // namespace torch_infini::amp
