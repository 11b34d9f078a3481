#pragma once

// The generic kernel's synchronizing path (ops/aten/aten_direct.cpp), on
// providers that run CPU kernels over device memory: wait for the current
// stream, run the CPU kernel on the calling thread, return its results as
// infini tensors. It serves calls whose results depend on the data, calls
// whose written arguments overlap their inputs, and the first call of every
// kind (CPU's own errors, raised at the call, and CPU's own output
// metadata, which later calls of that kind reuse without running anything).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <memory>

#include "ops/aten/aten_layouts.h"
#include "ops/aten/aten_plan.h"

namespace torch_infini::ops {

// Whether a call must take the direct path whatever the cache says: a
// written tensor overlaps itself or another argument, other than by being
// that very tensor (recorded in `*same`: CPU kernels take x.mul_(2), run as
// mul.out(x, 2, out=x), as they take any in-place call, so it is queued
// like one), or an index tensor is a mask (x[mask], x[mask] = v).
bool needs_direct_run(const Plan& plan, c10::ArrayRef<c10::IValue> args,
                      SameArguments* same);

// Whether an index tensor of the call is a mask (x[mask], x[mask] = v): the
// result's shape, or what is written, depends on the data.
bool indexes_by_mask(c10::ArrayRef<c10::IValue> args);

// Runs the call on `stack` directly, after the work queued on `target`'s
// stream, replacing its arguments with its returns. Returns its outputs'
// metadata (to cache, for a call that may be queued next time).
std::shared_ptr<const Layouts> run_direct(const Plan& plan,
                                          const c10::OperatorHandle& op,
                                          const CallTarget& target,
                                          torch::jit::Stack* stack);

}  // namespace torch_infini::ops
