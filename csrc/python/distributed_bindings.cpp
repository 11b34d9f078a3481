#include "python/distributed_bindings.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "distributed/ProcessGroupInfini.h"

namespace torch_infini {

void bind_distributed(pybind11::module& m) {
  // Takes and returns torch's own c10d Backend binding: the host backend is
  // a ProcessGroupGloo made in Python, the result goes to
  // ProcessGroup._register_backend.
  m.def(
      "_create_process_group",
      [](const c10::intrusive_ptr<c10d::Backend>& host, int rank, int size) {
        return distributed::create_process_group(host, rank, size);
      },
      pybind11::arg("host_backend"), pybind11::arg("rank"), pybind11::arg("size"),
      pybind11::call_guard<pybind11::gil_scoped_release>(),
      "The infini c10d backend over `host_backend` (a CPU backend such as gloo).");
}

}  // namespace torch_infini
