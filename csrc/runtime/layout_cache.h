#pragma once

// The outputs' metadata of generic-kernel calls, cached per thread by the
// call's overload, argument metadata and values (the floating-point values
// of a call writing only its inputs by class: see layout_cache.cpp), and
// the global and thread-local state its kernels read
// (runtime/dispatch_state.h): a call like one seen before, under the same
// state, gets its outputs' metadata without running anything. Filled by
// the meta run (ops/aten/aten_meta.h) and by the host runtime's first,
// direct runs (runtime/host/host_direct.h).

#include <ATen/core/ivalue.h>
#include <c10/util/FunctionRef.h>

#include <cstdint>
#include <memory>
#include <string>

#include "runtime/aten_plan.h"
#include "runtime/dispatch_state.h"

namespace torch_infini::runtime {

// Which written tensor arguments of a call are the very tensor of another
// argument (x.mul_(2) runs as mul.out(x, 2, out=x)): bit 16 * k + i says
// that written argument k (in Plan::written's order) is argument i. Part
// of the key: some CPU kernels refuse an output that is an input, so such
// a call is cached apart from one whose output is separate.
using SameArguments = uint64_t;

// How a miss would lay the call out, for the verification mode
// (TORCH_INFINI_VERIFY_CACHES=1), which recomputes every hit.
using RecomputeLayouts = c10::function_ref<Layouts()>;

// A call's key in the cache, taken before it runs (running it may resize
// its outputs), with the state it was taken under and, in the verification
// mode, what of its arguments the key leaves out on purpose (storage
// offsets, CPU scalars' values, floating values keyed by class), to name
// them when a hit differs. An empty `key`: the call cannot be keyed.
struct LayoutsKey {
  std::string key;
  DispatchState state;
  std::string unkeyed;
};

// The cached layouts of a call like `args` of `plan`, or nullptr (not seen
// yet, or an argument of a kind the cache does not key: such calls are
// never cached). A hit allocates nothing. On a miss, `*miss` (when given)
// receives the call's key for remember_layouts. In the verification mode a
// hit is checked against `recompute()`, and a difference raises.
std::shared_ptr<const Layouts> find_layouts(const Plan& plan,
                                            c10::ArrayRef<c10::IValue> args,
                                            SameArguments same,
                                            LayoutsKey* miss,
                                            RecomputeLayouts recompute);

// Caches `layouts` under a key from find_layouts (nothing where the call
// could not be keyed).
void remember_layouts(LayoutsKey key, std::shared_ptr<const Layouts> layouts);

// What differs between two calls' layouts ("result 0: sizes [2] then [3]"),
// or empty where they agree.
std::string layouts_difference(const Layouts& cached, const Layouts& fresh);

}  // namespace torch_infini::runtime
