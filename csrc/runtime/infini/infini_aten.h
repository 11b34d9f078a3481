#pragma once

// The ATen overloads (OpKernels::aten) InfiniOps serves: each file of a
// concern (infini_gemm.cpp, infini_pointwise.cpp, ...) contributes servers,
// infini_kernels.cpp dispatches calls to them by overload name.

#include <functional>
#include <string>
#include <vector>

#include "runtime/infini/infini_provider.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::infini {

struct AtenServer {
  std::vector<std::string> overloads;  // "aten::mm.out", ...
  // Empty when InfiniOps runs `call` exactly as PyTorch would; otherwise the
  // reason, naming the InfiniOps kernel and its limit.
  std::function<std::string(const AtenCall& call)> unsupported;
  // Runs a call `unsupported` accepted.
  std::function<void(int device, StreamHandle stream, const AtenCall& call)>
      run;
};

// What one concern serves on `provider`'s backend, and its support rows
// (appended to `support` only where the InfiniOps kernel is there).
std::vector<AtenServer> gemm_servers(InfiniProvider& provider,
                                     std::vector<OpSupport>& support);
std::vector<AtenServer> pointwise_servers(InfiniProvider& provider,
                                          std::vector<OpSupport>& support);
std::vector<AtenServer> cat_servers(InfiniProvider& provider,
                                    std::vector<OpSupport>& support);

// The tensor argument `index` of `call`, or undefined.
inline const at::Tensor& tensor_at(const AtenCall& call, size_t index) {
  static const at::Tensor undefined;
  return index < call.args.size() && call.args[index].isTensor()
      ? call.args[index].toTensor()
      : undefined;
}

// "aten::mm.out".
inline std::string overload_name(const AtenCall& call) {
  return c10::toString(call.op.operator_name());
}

}  // namespace torch_infini::runtime::infini
