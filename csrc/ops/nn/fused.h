#pragma once

// Fused operators that have no ATen operator of their own (InfiniOps'
// RmsNorm, Swiglu, SiluAndMul, CausalSoftmax), reached from F.rms_norm
// (aten::rms_norm, ops/nn/fused.cpp) and from torch.ops.infini.*
// (torch_infini/fused_ops.py). Where the provider has no such kernel, or
// the call is not one it computes as PyTorch does, the caller composes the
// operator from ATen operators, as it does on every other device.

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/fused_kernels.h"

namespace torch_infini::ops {

// The result of `op` over `inputs` (see runtime::FusedOp for what each
// takes), computed by the provider's fused kernel on the current stream; or
// nullopt where the provider cannot: the host runtime, a build without the
// kernel, a dtype or layout it does not serve, tensors under a Python
// dispatch mode, subclass or functionalization (torch.compile's tracing),
// empty tensors.
std::optional<at::Tensor> run_fused(runtime::FusedOp op,
                                    const std::vector<at::Tensor>& inputs,
                                    float eps = 0.0f);

// run_fused for torch.ops.infini.<name>, recording in the coverage report
// whether the call ran on the fused kernel or was composed.
std::optional<at::Tensor> run_fused_custom_op(
    const std::string& name, const std::vector<at::Tensor>& inputs);

}  // namespace torch_infini::ops
