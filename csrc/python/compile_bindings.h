#pragma once

// torch_infini._C's names for compiled graphs (torch_infini/_compile.py):
// _host_call, which runs an out= extern kernel of a graph on the calling
// thread over host aliases of its infini tensors, and _empty_strided, which
// allocates a graph's buffers.

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_compile(pybind11::module& m);

}  // namespace torch_infini
