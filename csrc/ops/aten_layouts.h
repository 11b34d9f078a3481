#pragma once

// The outputs' metadata of generic-kernel calls, cached per thread by the
// call's overload, argument metadata and values: a call like one seen
// before gets its outputs' metadata without running anything.

#include <ATen/core/ivalue.h>

#include <memory>

#include "ops/aten_plan.h"

namespace torch_infini::ops {

// The cached layouts of a call like `args` of `plan`, or nullptr (not seen
// yet, or an argument of a kind the cache does not key: such calls are
// never cached). A hit allocates nothing.
std::shared_ptr<const Layouts> find_layouts(const Plan& plan,
                                            c10::ArrayRef<c10::IValue> args);

// Caches `layouts` for calls like `args` (where they can be keyed).
void remember_layouts(const Plan& plan, c10::ArrayRef<c10::IValue> args,
                      std::shared_ptr<const Layouts> layouts);

}  // namespace torch_infini::ops
