#include "runtime/fused_kernels.h"

#include <atomic>

namespace torch_infini::runtime {
namespace {
std::atomic<FusedKernels*> installed{nullptr};
}  // namespace

const char* fused_op_name(FusedOp op) {
  switch (op) {
    case FusedOp::kRmsNorm: return "RmsNorm";
    case FusedOp::kSwiglu: return "Swiglu";
    case FusedOp::kSiluAndMul: return "SiluAndMul";
    case FusedOp::kCausalSoftmax: return "CausalSoftmax";
  }
  return "unknown";
}

FusedKernels* fused_kernels() { return installed.load(std::memory_order_acquire); }

void set_fused_kernels(FusedKernels* kernels) {
  installed.store(kernels, std::memory_order_release);
}

}  // namespace torch_infini::runtime
