#pragma once

// InfiniOps' fused operators (infini_fused.cpp): whether this build and
// backend have the kernel, the refusal of a call (empty: it runs with
// PyTorch's semantics), and the launch of an accepted one.

#include <string>

#include "runtime/fused_kernels.h"
#include "runtime/infini/infini_provider.h"

namespace torch_infini::runtime::infini {

bool fused_kernel_present(const InfiniProvider& provider, FusedOp op);
std::string fused_unsupported(const InfiniProvider& provider,
                              const FusedArgs& args);
void launch_fused(InfiniProvider& provider, int device, StreamHandle stream,
                  const FusedArgs& args);

}  // namespace torch_infini::runtime::infini
