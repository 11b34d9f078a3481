#pragma once

// The boxed kernel serving the ATen operator families (ops/aten/aten_kernel.cpp),
// for native kernels that hand it the calls their own fast path does not
// take (add with operands of two dtypes, which CPU promotes).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/util/FunctionRef.h>
#include <torch/library.h>

#include <string>

namespace torch_infini::ops {

// Runs `op` (an overload in an op family's `overloads` or `custom` list) on
// `stack` as the family kernel does: CPU's checks, type promotion and output
// layout, then the provider.
void run_family_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// What the provider cannot serve goes one way, from one place (design.md,
// "one exit"): PyTorch's decomposition where one may serve the call, else
// the opt-in CPU fallback where it may run it, else NotImplementedError.
// Callers say whether a decomposition may serve (not where a kernel the
// library has refuses the call for a limit: bfloat16 addmm as mm + add would
// round twice) and word the refusal, given what the decomposition lacked
// (empty where none was tried or it called nothing unserved); `refuse` must
// raise.
struct Unserved {
  bool decomposable;
  c10::function_ref<void(const std::string& decomposition_refusal)> refuse;
};
void serve_unserved(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    const Unserved& unserved);

// Runs `op`'s decomposition as the generic kernel does for an overload its
// provider does not serve (decompose, aten_decompose.h, with the overload's
// plan: results laid out as the meta run lays them out, CPU's errors), on
// any provider: for tests, as the host runtime never decomposes.
bool decompose_as_kernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack, std::string* refusal);

// The generic kernel, for registration (ops/aten/aten_registry.cpp).
torch::CppFunction generic_aten_kernel();

}  // namespace torch_infini::ops
