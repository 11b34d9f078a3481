#include "ops/decomposition_scope.h"

#include <algorithm>

#include "ops/common.h"

namespace torch_infini::ops {
namespace {

// The overloads being decomposed on this thread, innermost last.
std::vector<const c10::FunctionSchema*>& in_progress() {
  thread_local std::vector<const c10::FunctionSchema*> schemas;
  return schemas;
}

}  // namespace

bool decomposing() { return !in_progress().empty(); }

bool decomposing(const c10::FunctionSchema& schema) {
  const auto& running = in_progress();
  return std::find(running.begin(), running.end(), &schema) != running.end();
}

std::string decompositions_in_progress() {
  std::string names;
  for (const c10::FunctionSchema* schema : in_progress()) {
    names += full_name(schema->operator_name()) + ">";
  }
  return names;
}

DecompositionScope::DecompositionScope(const c10::FunctionSchema& schema) {
  in_progress().push_back(&schema);
}

DecompositionScope::~DecompositionScope() { in_progress().pop_back(); }

}  // namespace torch_infini::ops
