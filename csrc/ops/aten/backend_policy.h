#pragma once

// TORCH_INFINI_ENFORCE_BACKEND: the host runtime behaves, operator by
// operator, as one InfiniOps backend would. A call the chosen backend does
// not serve natively (per the InfiniOps support matrix kept in the package,
// torch_infini/data/infiniops_<pin>.json) is refused with NotImplementedError
// naming the overload, the backend and the pin, or, with the opt-in CPU
// fallback on, runs through that fallback (counted as it is on the stack).
//
// Python computes the set of overloads the backend serves (the matrix, the
// binding rules, and what the device runs itself: views, copies, fills,
// allocation) and installs it here (torch_infini/backend_support.py); this
// file only holds and applies it. Off, the hook costs one relaxed load.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>
#include <vector>

namespace torch_infini::ops::backend_policy {

// Enforce `backend` (at InfiniOps `pin`): every overload outside `served`
// that reaches a hooked kernel is diverted. `setting` is the variable's
// value, quoted in messages.
void enforce(std::string backend, std::string pin, std::string setting,
             const std::vector<std::string>& served);
void clear();
bool active();
// {backend, pin} while active; empty strings otherwise.
std::vector<std::string> target();

// Where the enforced backend would not serve `op` natively: runs the call
// through the opt-in CPU fallback (returns true, the stack holding its
// results) or raises NotImplementedError. Returns false, touching nothing,
// for every call it serves and whenever enforcement is off.
bool divert(const c10::OperatorHandle& op, torch::jit::Stack* stack);

}  // namespace torch_infini::ops::backend_policy
