#pragma once

// PyTorch's own decompositions, for the overloads a provider does not map
// onto its library: on the Infini stack an operator InfiniOps lacks
// (native_layer_norm, arange, flip, ...) runs as the operators PyTorch
// decomposes it into (torch._decomp), where those are served. The
// decompositions are Python functions; torch_infini.decompositions installs
// them (python/decompose_bindings.cpp), so this layer holds only the hook.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>

#include "ops/aten/aten_plan.h"
#include "ops/aten/decomposition_replay.h"

namespace torch_infini::ops {

// Runs the decomposition of `op` on `stack`, leaving its returns there;
// false, with `stack` untouched, where it has none or the decomposition
// could not run: then `refusal` holds the first line of the refusal of the
// operator it calls that is not served (empty where it has none). With a
// `recording`, the run's operator calls are recorded into it
// (decomposition_replay.h).
using DecomposeHook = bool (*)(const c10::OperatorHandle& op,
                               torch::jit::Stack* stack, std::string* refusal,
                               Recording* recording);

void set_decompose_hook(DecomposeHook hook);

// Forgets what the runs of the hook's decompositions taught (the refusals
// they met, their recorded calls): their Python code was replaced.
void forget_decomposition_runs();

// The installed hook's run of `op`, except within `op`'s own decomposition
// on this thread (one that calls itself, through PyTorch's primitives, is
// not a decomposition).
bool try_decompose(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                   std::string* refusal, Recording* recording = nullptr);

// Runs PyTorch's decomposition of a call the provider does not serve, into
// operators it may serve, leaving its returns on the stack, laid out as the
// meta run lays them out (a call CPU refuses raises CPU's error first): for a
// non-random overload writing only out= arguments, if any, or only self in
// place (one that failed part-way wrote nothing, as out= and self are
// written last; a random one would not draw what CPU's kernel draws).
// Otherwise, or where an operator it calls is refused (`refusal` gets why),
// false. The CPU 0-dim tensors the call reads (scalars, not wrapped
// numbers) reach the decomposition on the call's device. Counted as
// composite in the coverage record. A call whose decomposition ran before
// for the same key replays its recorded operator calls, without Python
// (decomposition_replay.h).
bool decompose(const Plan& plan, const c10::OperatorHandle& op,
               torch::jit::Stack* stack, std::string* refusal);

}  // namespace torch_infini::ops
