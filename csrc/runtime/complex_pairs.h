#pragma once

// Complex operands read as pairs of their real dtype.
//
// InfiniRT has no complex DataType, so a complex tensor can reach InfiniOps
// only as a view of its parts: complex64 [.., n] as float32 [.., n, 2]
// (torch.view_as_real's view: the same memory, strides doubled, the pair's
// stride 1). InfiniOps' ATen-backed implementation then hands ATen that
// float tensor. For the operators of complex_pairs.cpp's table ATen computes
// on the pairs, bit for bit, what it computes on the complex values: they
// move, select or copy whole elements and never do arithmetic on them
// (where, cat, stack, index_select, gather, take_along_dim, index_copy,
// narrow_copy, scatter with a source). Each table entry says how the call's
// other arguments follow the new trailing dimension: a dimension argument is
// made non-negative (a negative one would now count the pairs), an index
// tensor of gather/scatter/take_along_dim is spread over the pair (one index
// per part), where's condition is broadcast beside it.
//
// Arithmetic is not in the table, even where it looks componentwise:
// PyTorch's complex add computes a + alpha * b with a complex multiply by
// alpha = 1 + 0i, so an infinite imaginary part gives a NaN real part and
// -0 + -0 gives +0, and its complex negation of a zero part is +0
// (-(0+0i) is 0+0i); the pairs' float add and neg give other values there
// (tests/ops/test_complex_pairs.py shows each). Everything outside the table
// is refused naming InfiniRT's missing complex DataType.

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <string>
#include <vector>

namespace torch_infini::runtime {

// One operator of the table: every overload of ATen's `name`.
struct ComplexPairsOp {
  const char* name;  // "aten::gather"
  // The dimension argument, made non-negative against the output's rank,
  // or nullptr. `dim_required`: a None there (take_along_dim's flattening)
  // is refused.
  const char* dim;
  bool dim_required;
  // Integer index tensors spread over the pair (unsqueeze(-1), expand to 2),
  // or kept as they are (index_select's and index_copy's 1-D index).
  std::vector<const char*> spread;
  std::vector<const char*> kept;
  // Tensors broadcast beside the pair (unsqueeze(-1)): where's condition.
  std::vector<const char*> beside;
  // Arguments whose presence makes the call compute on the values
  // (scatter's reduce) or fill them from a Scalar (scatter's value): the
  // overloads that have one are refused.
  std::vector<const char*> refused;
};

// The operators whose ATen kernels compute on complex operands' pairs as on
// the complex values (tested against CPU, tests/ops/test_complex_pairs.py).
const std::vector<ComplexPairsOp>& complex_pairs_table();

// Whether any tensor of the call (`args`: its arguments, with the results of
// a functional overload appended) is complex.
bool has_complex_tensor(const std::vector<c10::IValue>& args);

// Why the call's complex tensors cannot reach ATen as pairs; empty when they
// can, or when the call has none.
std::string complex_pairs_reason(const c10::FunctionSchema& schema,
                                 const std::vector<c10::IValue>& args);

// The call's arguments with every complex tensor replaced by its pairs and
// the others made to follow (see ComplexPairsOp). Only for a call
// complex_pairs_reason accepted.
std::vector<c10::IValue> complex_as_pairs(const c10::FunctionSchema& schema,
                                          const std::vector<c10::IValue>& args);

// Whether ATen's operator `name` ("aten::where") is in the table.
bool complex_pairs_operator(const std::string& name);

// Names the DataType InfiniRT lacks for `t` ("InfiniRT has no complex64
// DataType"), or says that torch-infini does not pass it where InfiniRT has
// one (uint16, uint32, uint64); empty for the dtypes torch-infini passes.
std::string missing_datatype(c10::ScalarType t);

}  // namespace torch_infini::runtime
