#pragma once

// torch_infini._C._set_decomposition_runner: the Python function that runs
// PyTorch's decomposition of an overload the provider does not map
// (torch_infini.decompositions; ops/aten/aten_decompose.h).

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_decompositions(pybind11::module& m);

}  // namespace torch_infini
