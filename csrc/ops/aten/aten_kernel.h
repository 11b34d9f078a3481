#pragma once

// The boxed kernel serving the ATen operator families (ops/aten/aten_kernel.cpp),
// for native kernels that hand it the calls their own fast path does not
// take (add with operands of two dtypes, which CPU promotes).

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <torch/library.h>

#include <string>

namespace torch_infini::ops {

// Runs `op` (an overload in an op family's `overloads` or `custom` list) on
// `stack` as the family kernel does: CPU's checks, type promotion and output
// layout, then the provider.
void run_family_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// Runs `op`'s decomposition as the generic kernel does for an overload its
// provider does not serve (decompose, aten_decompose.h, with the overload's
// plan: results laid out as the meta run lays them out, CPU's errors), on
// any provider: for tests, as the host runtime never decomposes.
bool decompose_as_kernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack, std::string* refusal);

// The generic kernel, for registration (ops/aten/aten_registry.cpp).
torch::CppFunction generic_aten_kernel();

}  // namespace torch_infini::ops
