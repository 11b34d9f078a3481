#pragma once

// torch_infini._C's names for sharing infini tensors between processes
// (core/InfiniIpc.h): _share_storage, _open_shared_storage,
// _ipc_unsupported_reason.

#include <pybind11/pybind11.h>

namespace torch_infini {

void bind_ipc(pybind11::module& m);

}  // namespace torch_infini
