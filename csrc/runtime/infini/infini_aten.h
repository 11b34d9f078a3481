#pragma once

// The ATen overloads (OpKernels::aten) InfiniOps serves: each file of a
// concern (infini_gemm.cpp, infini_cat.cpp) contributes servers,
// infini_kernels.cpp dispatches calls to them by overload name.

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
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
  // Optional: whether the overload's generic binding, ATen-backed, runs
  // `call` in fewer launches than this entry would (one at::addmm_out where
  // the entry runs a product, then adds a bias): the generic binding is
  // then tried first, and this entry serves what it refuses.
  std::function<bool(const AtenCall& call)> generic_first;
};

// "aten::mm.out". Formatted once per operator and thread: c10::toString
// writes through an ostringstream (a locale, dynamic_casts, a heap
// allocation: about 1,500 instructions, asked twice per call). Keyed by the
// schema's address, checked against the operator's name (an operator
// registered later may reuse a freed schema's address).
inline const std::string& overload_name(const AtenCall& call) {
  thread_local std::unordered_map<
      const c10::FunctionSchema*,
      std::pair<c10::OperatorName, std::string>>
      names;
  const c10::OperatorName& op = call.op.operator_name();
  const auto it = names.find(&call.op.schema());
  if (it != names.end() && it->second.first == op) {
    return it->second.second;
  }
  auto entry = std::make_pair(op, c10::toString(op));
  return names.insert_or_assign(&call.op.schema(), std::move(entry))
      .first->second.second;
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
