#pragma once

// Bindings of the c10d backend (csrc/distributed/) into torch_infini._C.

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_distributed(pybind11::module& m);

}  // namespace torch_infini
