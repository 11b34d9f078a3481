#pragma once

// The generic kernel's vocabulary (runtime/aten_plan.h), by its names in
// ops/: a call's plan, target and output layouts, shared with the
// provider's strategy that runs it.

#include "runtime/aten_plan.h"

namespace torch_infini::ops {

using runtime::CallTarget;
using runtime::for_each_tensor;
using runtime::Layout;
using runtime::layout_of;
using runtime::Layouts;
using runtime::match_layout;
using runtime::Plan;
using runtime::result_layout;
using runtime::ResultLayout;
using runtime::returns_written;

}  // namespace torch_infini::ops
