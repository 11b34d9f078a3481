#include "python/ipc_bindings.h"

#include <ATen/core/Tensor.h>
#include <c10/core/TensorImpl.h>
#include <torch/csrc/utils/pybind.h>

#include "core/InfiniIpc.h"

namespace torch_infini {

namespace py = pybind11;

void bind_ipc(py::module& m) {
  m.def("_ipc_unsupported_reason", &ipc::unsupported_reason,
        "Why infini tensors cannot be shared between processes here; empty "
        "where they can.");
  m.def(
      "_share_storage",
      [](const at::Tensor& tensor) {
        ipc::SharedStorage shared;
        {
          py::gil_scoped_release no_gil;  // waits for the device's work
          shared = ipc::share(tensor.storage());
        }
        return py::make_tuple(shared.device, shared.fd, shared.bytes);
      },
      "Moves the storage of `tensor` into shared device memory (once) and "
      "returns (device index, the storage's file descriptor naming it, its "
      "bytes); the descriptor lives as long as the storage.");
  m.def(
      "_open_shared_storage",
      [](int64_t device, int fd, size_t bytes) {
        c10::Storage storage =
            ipc::open(static_cast<c10::DeviceIndex>(device), fd, bytes);
        // A uint8 tensor over the whole storage: Python takes its
        // untyped_storage() and views it with the sender's metadata.
        auto tensor = at::detail::make_tensor<c10::TensorImpl>(
            std::move(storage),
            c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
            caffe2::TypeMeta::Make<uint8_t>());
        tensor.unsafeGetTensorImpl()->set_sizes_contiguous(
            {static_cast<int64_t>(bytes)});
        return tensor;
      },
      "Maps device memory another process shared (takes `fd` over) as a "
      "uint8 tensor over the whole storage.");
}

}  // namespace torch_infini
