#pragma once

#include <string>

namespace torch_infini::runtime {

// Why the current provider was selected, for the diagnostics.
std::string selection_reason();

}  // namespace torch_infini::runtime
