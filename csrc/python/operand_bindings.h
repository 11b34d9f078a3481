#pragma once

// The rules by which the Infini stack passes operands InfiniRT has no
// DataType for: bool tensors as their bytes (runtime/bool_operands.h),
// complex tensors as pairs of their real dtype (runtime/complex_pairs.h).
// Bound for their tests against CPU, which need no stack.

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_operand_rules(pybind11::module& m);

}  // namespace torch_infini
