#pragma once

// The ATen operators served through the generic kernel entry
// (OpKernels::aten): which overloads the ops layer registers for the infini
// device, grouped by family, and the dtypes each family's PyTorch semantics
// cover. One table read by the ops layer (what to register) and by both
// providers (what they declare they run).

#include <c10/core/ScalarType.h>

#include <string>
#include <vector>

namespace torch_infini::runtime {

struct AtenOpFamily {
  std::string family;                  // e.g. "matmul"
  std::vector<std::string> overloads;  // "aten::mm", "aten::mm.out", ...
  std::vector<c10::ScalarType> dtypes;  // of the call's first tensor
  // Elementwise over broadcast inputs (a TensorIterator op on the CPU), so
  // results take the layout of the inputs.
  bool elementwise = false;
  // Every tensor argument must have one dtype (CPU's matmul rule).
  bool same_dtype = false;
  // Overloads of the family with a kernel of their own in ops/ (an entry of
  // the element-wise or row-wise table, ops/arithmetic.cpp and
  // ops/rowwise.cpp, or an output whose shape depends on the data), which
  // build their calls themselves.
  std::vector<std::string> custom = {};
};

// Every family, in a fixed order.
const std::vector<AtenOpFamily>& aten_op_families();

// The family serving `overload` ("aten::mul.out"), or nullptr.
const AtenOpFamily* aten_op_family(const std::string& overload);

// "float32, float16, ..." for messages.
std::string dtype_list(const std::vector<c10::ScalarType>& dtypes);

}  // namespace torch_infini::runtime
