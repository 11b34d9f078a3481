#pragma once

// Bool operands read as their bytes.
//
// InfiniRT has no bool DataType, so a bool tensor reaches InfiniOps viewed as
// uint8: its bytes, 0 and 1. InfiniOps' ATen-backed implementation then hands
// ATen a uint8 tensor. For the operators of bool_operands.cpp's table ATen
// computes on those bytes what it computes on the bools, with two conditions
// this rule checks per call:
// - type promotion: a bool operand promoted alongside an integer one yields
//   the integer dtype, a uint8 one may yield uint8 (a dimensioned uint8
//   beats a 0-dim int64; a bool does not), so among the operands that
//   promote together a bool one may meet only bool and floating ones;
// - counting: a result that counts true values (sum, cumsum) is not 0 or 1,
//   so it is not taken into a bool output (ATen clamps it to true there).
// Everything else (masked_fill, which refuses a uint8 mask; bitwise_not,
// whose ~1 is 254) is refused, and PyTorch's decomposition may serve it.

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace torch_infini::runtime {

// One operator of the table: every overload of ATen's `name`.
struct BoolOperandsOp {
  const char* name;      // "aten::where"
  int non_promoting;     // the argument that takes no part in promotion, or -1
  bool counts;           // its result counts true values
};

// The operators whose ATen kernels compute on bool operands' bytes as on the
// bools (tested against CPU, tests/ops/test_bool_operands.py).
const std::vector<BoolOperandsOp>& bool_operands_table();

// Whether any input tensor of the call (`args`: its arguments, with the
// results of a functional overload appended) is bool.
bool has_bool_operand(const c10::FunctionSchema& schema,
                      const std::vector<c10::IValue>& args);

// Why ATen cannot be given the call's bool operands as their bytes; empty
// when it can, or when the call has none.
std::string bool_operands_reason(const c10::FunctionSchema& schema,
                                 const std::vector<c10::IValue>& args);

}  // namespace torch_infini::runtime
