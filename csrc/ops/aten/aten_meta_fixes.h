#pragma once

// Where PyTorch's meta function lays out an output otherwise than CPU's
// kernel does. The Infini stack lays out every output by a meta run
// (aten_meta.h), and CPU is the oracle: without these its results would
// differ from CPU's in shape, dtype or strides although their values are
// right (a batch norm's saved statistics in evaluation, a bfloat16 layer
// norm's mean, the V of an SVD). One rule per operator family, found by
// comparing every call PyTorch's OpInfo samples make on CPU with the same
// call on meta tensors; tests/ops/test_meta_fixes.py checks each against
// CPU.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <vector>

#include "ops/aten/aten_plan.h"

namespace torch_infini::ops {

// Rewrites `results` as CPU lays them out, where `op` has a rule. They are
// the call's results in schema order: an out= overload's out arguments,
// else the returns that are not arguments written in place (a batch norm's
// running statistics); nullptr for a tensor list. `args` are the call's
// arguments (device tensors; only their metadata is read).
void conform_meta_layouts_to_cpu(const c10::OperatorHandle& op,
                                 c10::ArrayRef<c10::IValue> args,
                                 const std::vector<Layout*>& results);

}  // namespace torch_infini::ops
