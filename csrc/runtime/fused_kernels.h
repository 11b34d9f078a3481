#pragma once

// Fused operators of InfiniOps that have no ATen operator of their own,
// reached from F.rms_norm and torch.ops.infini.* (ops/nn/fused.cpp). A provider
// with such kernels installs them (set_fused_kernels) when its kernels are
// made; the others have none, and the ops layer then composes the operators
// from ATen operators.

#include <c10/util/SmallVector.h>

#include <string>

#include "runtime/kernels.h"

namespace torch_infini::runtime {

enum class FusedOp {
  kRmsNorm,        // inputs {input [rows, d] or [b, h, d], weight [d]}
  kSwiglu,         // inputs {input, gate} of out's shape: input * silu(gate)
  kSiluAndMul,     // inputs {x [..., 2d]}: silu(x[..., :d]) * x[..., d:]
  kCausalSoftmax,  // inputs {x [(b,) seq, total]}, seq <= total
};

const char* fused_op_name(FusedOp op);

// Inputs and output are device tensors of one dtype; the output is new.
struct FusedArgs {
  FusedOp op;
  c10::SmallVector<TensorArg, 2> inputs;
  TensorArg out;
  float eps = 0.0f;  // kRmsNorm
};

class FusedKernels {
 public:
  virtual ~FusedKernels() = default;
  // Empty when `args` runs with PyTorch's semantics; otherwise why not.
  virtual std::string unsupported(const FusedArgs& args) const = 0;
  // Enqueues an accepted call on `stream` of `device`.
  virtual void launch(int device, StreamHandle stream,
                      const FusedArgs& args) = 0;
};

// The selected provider's fused kernels, or null (call after kernels(),
// which selects the provider).
FusedKernels* fused_kernels();
// By the provider's kernels, once, when they are made.
void set_fused_kernels(FusedKernels* kernels);

}  // namespace torch_infini::runtime
