#pragma once

// Which ATen overloads the generic kernel (ops/aten/aten_kernel.cpp) serves, and
// how each one runs. Read from the dispatcher's own table at load, never a
// hand-kept list: every overload with a CPU kernel, except
//   - CompositeImplicitAutograd overloads (their autograd formulas must stay
//     in charge: a kernel of ours would bypass them), unless they have a CPU
//     kernel too, which the CPU runs instead of the composite,
//   - overloads with an infini kernel of their own (copies, views, fills,
//     factories, random operators, ...),
//   - view operators (their result must share the input's storage; the ones
//     with CPU kernels are registered in ops/views.cpp),
//   - random operators without a Generator argument (ops/random/random_*.cpp serve
//     those); the ones with one (poisson, binomial, rrelu_with_noise, ...)
//     synchronize and draw from the infini generator's CPU state, so a seed
//     gives the CPU's numbers.

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>
#include <vector>

namespace torch_infini::ops {

// One overload the generic kernel serves.
struct AtenEntry {
  std::string name;  // "aten::cos.out"
  // Why every call waits for the stream and runs directly (the shape or
  // value of its result depends on the data, or it returns no tensor);
  // empty for the queued path.
  std::string sync_reason;
};

// Registers the generic kernel for PrivateUse1 (once; at module load, after
// the static registrations of the infini kernels, which it never replaces).
void register_generic_aten_kernels();

// Every overload registered by register_generic_aten_kernels, sorted.
const std::vector<AtenEntry>& generic_aten_entries();

// Why `op` always takes the synchronizing path; empty when it is queued.
std::string sync_reason_of(const c10::OperatorHandle& op);

// Whether CUDA's kernel of `op` makes the host wait too (its result's shape
// depends on the data, it returns a value, it reads values on the host):
// what torch.infini.set_sync_debug_mode reports (ops/sync_debug.h).
bool synchronizes_on_cuda(const c10::OperatorHandle& op);

// Whether CUDA checks `op`'s values in its kernel (an index out of range):
// its errors are raised at the next synchronization, for every call.
bool checks_values_on_device(const c10::OperatorHandle& op);

// Whether `op`'s queued kernels (CPU's out= kernel, on the host runtime and
// behind InfiniOps' ATen-backed operators) read an input that is not
// contiguous in its suggested memory format wrongly, where its functional
// overload reads it right: such inputs are given as contiguous copies.
bool needs_contiguous_inputs(const c10::OperatorHandle& op);

}  // namespace torch_infini::ops
