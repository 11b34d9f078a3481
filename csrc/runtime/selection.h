#pragma once

#include <map>
#include <string>

namespace torch_infini::runtime {

// Why the current provider was selected, for the diagnostics.
std::string selection_reason();

// InfiniRT backends the provider selection refuses, with why: an
// ATen-backed InfiniOps whose device PyTorch the process lacks
// (torch_infini/_aten_backed.py decides at import, before the provider is
// selected). Selecting a refused backend raises its message.
void refuse_backend(const std::string& backend, const std::string& why);
std::map<std::string, std::string> backend_refusals();

}  // namespace torch_infini::runtime
