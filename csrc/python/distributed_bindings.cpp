#include "python/distributed_bindings.h"

#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/utils/pybind.h>

#include "distributed/ProcessGroupInfini.h"

namespace torch_infini {
namespace {

// `backend` as the infini c10d backend, or an error naming what it is.
const distributed::ProcessGroupInfini& infini_backend(
    const c10::intrusive_ptr<c10d::Backend>& backend) {
  const auto* infini =
      dynamic_cast<const distributed::ProcessGroupInfini*>(backend.get());
  TORCH_CHECK(infini != nullptr, "not an infini process group backend: ",
              backend->getBackendName());
  return *infini;
}

}  // namespace

void bind_distributed(pybind11::module& m) {
  // Takes and returns torch's own c10d Backend binding: the host backend is
  // a ProcessGroupGloo made in Python, the result goes to
  // ProcessGroup._register_backend.
  m.def(
      "_create_process_group",
      [](const c10::intrusive_ptr<c10d::Backend>& host, int rank, int size,
         bool force_staging, const c10::intrusive_ptr<c10d::Store>& store) {
        return distributed::create_process_group(host, rank, size, force_staging, store);
      },
      pybind11::arg("host_backend"), pybind11::arg("rank"), pybind11::arg("size"),
      pybind11::arg("force_staging") = false, pybind11::arg("store") = nullptr,
      pybind11::call_guard<pybind11::gil_scoped_release>(),
      "The infini c10d backend over `host_backend` (a CPU backend such as gloo).");
  m.def(
      "_process_group_stages",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) {
        return infini_backend(backend).stages();
      },
      "Whether the infini backend copies through pinned staging buffers (else "
      "gloo works in place on the host-addressable device memory).");
  m.def(
      "_process_group_infini_ccl",
      [](const c10::intrusive_ptr<c10d::Backend>& backend) {
        const auto& infini = infini_backend(backend);
        return pybind11::make_tuple(infini.uses_infini_ccl(), infini.infini_ccl_status());
      },
      "(whether all_reduce runs on InfiniCCL where it can, why not).");
  m.def("_infini_ccl_compiled", &distributed::CclCommunicator::compiled);
}

}  // namespace torch_infini
