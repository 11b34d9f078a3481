#include "python/compile_bindings.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_strided.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/InfiniFunctions.h"
#include "ops/common.h"
#include "runtime/runtime.h"

namespace torch_infini {
namespace {

namespace py = pybind11;

// The out= overload that a torch function used as an extern kernel runs
// (torch.mm: aten::mm.out), looked up once per function; none for other
// kernels. The GIL, held by every caller, guards the table.
const c10::OperatorHandle* out_overload(const py::object& kernel) {
  static std::unordered_map<PyObject*,
                            std::pair<py::object, std::optional<c10::OperatorHandle>>>
      overloads;
  auto it = overloads.find(kernel.ptr());
  if (it == overloads.end()) {
    std::optional<c10::OperatorHandle> op;
    if (py::hasattr(kernel, "__name__") &&
        py::hasattr(kernel, "__module__") &&
        py::str(kernel.attr("__module__")).cast<std::string>() == "torch") {
      const auto name = "aten::" + py::str(kernel.attr("__name__")).cast<std::string>();
      op = c10::Dispatcher::singleton().findSchema({name, "out"});
    }
    it = overloads.emplace(kernel.ptr(), std::make_pair(kernel, op)).first;
  }
  return it->second.second ? &*it->second.second : nullptr;
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
        const c10::OperatorHandle* op = out_overload(kernel);
        TORCH_CHECK(op != nullptr, "_host_call: ",
                    py::str(kernel).cast<std::string>(),
                    " is not a torch function with an out= overload");
        // The CPU kernel through the dispatcher, over aliases that never
        // become Python objects: CPU tensors made in Python (ctypes over
        // the storage) cost ~7 us a tensor, Python objects made in C++ ~1 us,
        // more than a small matmul's kernel; these cost a fraction of that.
        torch::jit::Stack stack = torch::jit::createStackForSchema(
            op->schema(), torch::jit::tuple_slice(args), kwargs, std::nullopt);
        for (c10::IValue& value : stack) {
          if (value.isTensor() && value.toTensor().device().type() == kInfini) {
            value = ops::host_alias(value.toTensor());
          }
        }
        at::AutoDispatchBelowADInplaceOrView below_autograd;
        op->callBoxed(stack);
      },
      "Calls kernel(*args, **kwargs), a torch function such as torch.mm with "
      "out=, as its out= overload's CPU kernel, with each infini tensor "
      "replaced by a CPU tensor over the same memory (the host runtime's "
      "device memory is host memory). The caller orders it against the "
      "stream's work.");
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
