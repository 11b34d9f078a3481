#pragma once

// torch_infini._C's graph names: _InfiniGraph (core/InfiniGraph.h),
// _graph_pool_handle, _is_current_stream_capturing.

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_graphs(pybind11::module& m);

}  // namespace torch_infini
