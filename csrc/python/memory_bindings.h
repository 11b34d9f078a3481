#pragma once

// torch_infini._C's memory-history names (core/InfiniMemoryHistory.h):
// _record_memory_history, _memory_snapshot.

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_memory_history(pybind11::module& m);

}  // namespace torch_infini
