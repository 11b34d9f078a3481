#pragma once

// torch_infini._C's names for compiled graphs (torch_infini/_compile.py):
// _empty_strided, which allocates a graph's buffers, and _launch_host_kernel,
// which queues a generated C++ kernel on the current stream.

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_compile(pybind11::module& m);
// _launch_host_kernel (python/host_kernel_launch.cpp), bound by bind_compile.
void bind_host_kernel_launch(pybind11::module& m);

}  // namespace torch_infini
