#pragma once

// Which decompositions run on this thread. The fallback and the backend
// policy ask (a decomposition's operators do not fall back one by one, and
// its tries are not calls the program made); ops/aten's decompose() sets it.
// A floor below both rooms, so that neither includes the other for it.

#include <ATen/core/function_schema.h>

#include <string>
#include <vector>

namespace torch_infini::ops {

// Whether a decomposition is running on this thread. Its operators do not
// take the opt-in CPU fallback: one that is not served refuses, so the
// decomposition gives way and the overload it decomposes falls back whole
// (one copy each way, CPU's own kernel), not part by part.
bool decomposing();

// Whether `schema`'s own decomposition is running on this thread (one that
// calls itself, through PyTorch's primitives, is not a decomposition).
bool decomposing(const c10::FunctionSchema& schema);

// The overloads whose decompositions run on this thread, outermost first
// ("aten::arange.start_out>aten::cumsum>"): what a decomposition meets
// depends on them (an overload within its own decomposition is not
// decomposed again, so a cycle ends in a refusal worded by where it closes).
std::string decompositions_in_progress();

// `schema`'s decomposition runs on this thread while this lives.
class DecompositionScope {
 public:
  explicit DecompositionScope(const c10::FunctionSchema& schema);
  ~DecompositionScope();
  DecompositionScope(const DecompositionScope&) = delete;
  DecompositionScope& operator=(const DecompositionScope&) = delete;
};

}  // namespace torch_infini::ops
