#pragma once

// The output metadata of an op-family call: from a run on meta tensors
// (CPU's checks and shapes), cached per thread by the call's argument
// metadata and values.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <memory>
#include <vector>

#include "ops/aten_plan.h"

namespace torch_infini::ops {

// The metadata of one output: a functional result, or an out=/in-place
// argument after CPU's resizing.
struct Layout {
  bool defined = false;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// Raises CPU's errors for a bad call; otherwise returns its outputs'
// metadata (functional: each result; out=/in-place: each written argument,
// after CPU's resizing; an undefined Layout for a tensor list).
std::shared_ptr<const std::vector<Layout>> output_layouts(
    const Plan& plan, const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> args);

}  // namespace torch_infini::ops
