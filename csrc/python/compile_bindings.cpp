#include "python/compile_bindings.h"

#include <ATen/ops/empty_strided.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/utils/pybind.h>

#include <vector>

#include "core/InfiniFunctions.h"

namespace torch_infini {

namespace py = pybind11;

void bind_compile(py::module& m) {
  bind_host_kernel_launch(m);
  // A compiled graph's buffers, as Inductor's empty_strided_cpu/_cuda make
  // theirs: without Python's argument parsing of torch.empty_strided, which
  // costs a graph of a dozen buffers more than its smallest kernels.
  m.def(
      "_empty_strided",
      [](const std::vector<int64_t>& size, const std::vector<int64_t>& stride,
         const py::object& dtype, int64_t device_index) {
        TORCH_CHECK(THPDtype_Check(dtype.ptr()),
                    "_empty_strided: dtype must be a torch.dtype");
        const auto scalar_type =
            reinterpret_cast<THPDtype*>(dtype.ptr())->scalar_type;
        const c10::Device device =
            device_index < 0
                ? c10::Device(kInfini, current_device())
                : c10::Device(kInfini,
                              static_cast<c10::DeviceIndex>(device_index));
        return at::empty_strided(
            size, stride, at::TensorOptions().dtype(scalar_type).device(device));
      },
      py::arg("size"), py::arg("stride"), py::arg("dtype"),
      py::arg("device_index") = -1,
      "torch.empty_strided(size, stride, dtype=dtype, "
      "device=f'infini:{device_index}'); -1: the current device.");
}

}  // namespace torch_infini
