#pragma once

// The outputs' metadata of generic-kernel calls, cached per thread by the
// call's overload, argument metadata and values (the floating-point values
// of a call writing only its inputs by class: see aten_layouts.cpp): a
// call like one seen before gets its outputs' metadata without running
// anything.

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <memory>
#include <string>

#include "ops/aten/aten_plan.h"

namespace torch_infini::ops {

// Which written tensor arguments of a call are the very tensor of another
// argument (x.mul_(2) runs as mul.out(x, 2, out=x)): bit 16 * k + i says
// that written argument k (in Plan::written's order) is argument i. Part
// of the key: some CPU kernels refuse an output that is an input, so such
// a call is cached apart from one whose output is separate.
using SameArguments = uint64_t;

// The cached layouts of a call like `args` of `plan`, or nullptr (not seen
// yet, or an argument of a kind the cache does not key: such calls are
// never cached). A hit allocates nothing. On a miss of a call that can be
// keyed, `*miss_key` (when given) receives its key, for remember_layouts:
// taken before the call runs, since running it may resize its outputs.
std::shared_ptr<const Layouts> find_layouts(const Plan& plan,
                                            c10::ArrayRef<c10::IValue> args,
                                            SameArguments same = 0,
                                            std::string* miss_key = nullptr);

// Caches `layouts` under a key from find_layouts (an empty key: the call
// could not be keyed, and nothing is cached).
void remember_layouts(std::string key, std::shared_ptr<const Layouts> layouts);

}  // namespace torch_infini::ops
