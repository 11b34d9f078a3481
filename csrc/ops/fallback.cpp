// Every ATen operator without an infini kernel lands here and fails clearly,
// naming the operator. Nothing falls back to the CPU by default.

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_infini::ops {
namespace {

void no_kernel(const c10::OperatorHandle& op, torch::jit::Stack* /*stack*/) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, "The infini device has no kernel for '", op.schema().operator_name(),
      "' (provider ", provider_label(),
      "). Run `python -m torch_infini --ops` for the operators it supports; "
      "compute this one on the CPU explicitly (tensor.cpu()) if you need it.");
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&no_kernel>());
}

}  // namespace torch_infini::ops
