#pragma once

// The output metadata of a generic-kernel call from a run on meta tensors
// (CPU's shape checks and shapes), for providers that cannot run CPU kernels
// over device memory (the Infini stack). Cached like every call's layouts
// (runtime/layout_cache.h).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <memory>

#include "ops/aten/aten_plan.h"

namespace torch_infini::ops {

// Raises the meta function's errors for a bad call, and CPU's own for a
// call reading only empty tensors (whose checks meta functions skip);
// otherwise returns its outputs' metadata (functional: each result;
// out=/in-place: each written argument, after CPU's resizing).
std::shared_ptr<const Layouts> output_layouts(const Plan& plan,
                                              const c10::OperatorHandle& op,
                                              c10::ArrayRef<c10::IValue> args);

}  // namespace torch_infini::ops
