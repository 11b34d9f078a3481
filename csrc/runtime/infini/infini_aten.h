#pragma once

// The ATen overloads (OpKernels::aten) InfiniOps serves: each file of a
// concern (infini_gemm.cpp, infini_cat.cpp) contributes servers,
// infini_kernels.cpp dispatches calls to them by overload name.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/infini/infini_common.h"
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

// "aten::mm.out".
inline std::string overload_name(const AtenCall& call) {
  return c10::toString(call.op.operator_name());
}

// `overloads` served by `server`, an object with `unsupported(call)` and
// `run(device, stream, call)` (shared by the two entries).
template <typename Server>
AtenServer served_by(std::vector<std::string> overloads,
                     std::shared_ptr<Server> server) {
  return AtenServer{
      std::move(overloads),
      [server](const AtenCall& call) { return server->unsupported(call); },
      [server](int device, StreamHandle stream, const AtenCall& call) {
        server->run(device, stream, call);
      }};
}

// `overloads` refused: InfiniOps' `kernel` is not in this build or has no
// implementation for `backend`.
inline AtenServer refused(std::vector<std::string> overloads,
                          std::string kernel, std::string backend) {
  return AtenServer{std::move(overloads),
                    [kernel = std::move(kernel),
                     backend = std::move(backend)](const AtenCall& call) {
                      return no_kernel_reason(overload_name(call), kernel,
                                              backend);
                    },
                    nullptr};
}

// What one concern serves on `provider`'s backend, and its support rows
// (appended to `support` only where the InfiniOps kernel is there).
std::vector<AtenServer> gemm_servers(InfiniProvider& provider,
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


}  // namespace torch_infini::runtime::infini
