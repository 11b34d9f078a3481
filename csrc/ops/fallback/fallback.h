#pragma once

// The opt-in CPU fallback, for native kernels whose provider cannot run a
// particular call (a dtype, an argument its library lacks): with the fallback
// on, such a call runs on the CPU like an operator without a kernel.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <string>

namespace torch_infini::ops {

// Runs `op` with `stack` on the CPU when the opt-in fallback is on, its
// lists allow `op` and it can run `op` correctly (not a view, random or
// factory operator), warning once, counted in the coverage report; returns
// false, leaving `stack` untouched, otherwise.
bool try_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack);

// What an operator without a kernel on the provider gets: the opt-in CPU
// fallback where it is on and can run the operator correctly; otherwise
// NotImplementedError naming the operator and why. `why`, where given, says
// why the provider cannot run this call although it has a kernel.
void cpu_fallback_or_refuse(const c10::OperatorHandle& op,
                            torch::jit::Stack* stack,
                            const std::string& why = {});

// The fallback's CPU run of `op`, whatever provider and policy (tests of
// the copy-back on the host runtime, where every operator has a kernel).
void run_on_cpu_for_test(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack);

// Whether `schema` is a random operator: it takes a Generator, or is random
// by name (normal, rand*, dropout, ...; backward formulas are not).
bool is_random_operator(const c10::FunctionSchema& schema);

}  // namespace torch_infini::ops
