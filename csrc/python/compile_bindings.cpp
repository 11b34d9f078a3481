#include "python/compile_bindings.h"

#include <ATen/ops/empty_strided.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <vector>

#include "core/InfiniFunctions.h"
#include "ops/common.h"
#include "runtime/runtime.h"

namespace torch_infini {
namespace {

namespace py = pybind11;

// An infini tensor argument as a CPU alias of its memory; anything else as it
// is. A Python-level alias (ctypes over the storage, as_strided) cost ~7 us a
// tensor, more than a small matmul's kernel.
py::object host_value(const py::handle& value) {
  if (THPVariable_Check(value.ptr())) {
    const at::Tensor& t = THPVariable_Unpack(value.ptr());
    if (t.device().type() == kInfini) {
      return py::reinterpret_steal<py::object>(THPVariable_Wrap(ops::host_alias(t)));
    }
  }
  return py::reinterpret_borrow<py::object>(value);
}

}  // namespace

void bind_compile(py::module& m) {
  m.def(
      "_host_call",
      [](const py::object& kernel, const py::args& args,
         const py::kwargs& kwargs) {
        TORCH_CHECK(runtime::provider().capabilities().host_addressable,
                    "_host_call: the ", runtime::provider().name(),
                    " provider's device memory is not addressable from the "
                    "host");
        py::tuple host_args(args.size());
        for (size_t i = 0; i < args.size(); ++i) {
          host_args[i] = host_value(args[i]);
        }
        py::dict host_kwargs;
        for (const auto& item : kwargs) {
          host_kwargs[item.first] = host_value(item.second);
        }
        return kernel(*host_args, **host_kwargs);
      },
      "Calls kernel(*args, **kwargs) with each infini tensor replaced by a "
      "CPU tensor over the same memory (the host runtime's device memory is "
      "host memory). The caller orders it against the stream's work.");
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
