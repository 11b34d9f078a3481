// torch_infini._C._launch_host_kernel: a compiled graph's generated C++
// kernel queued on the current infini stream, as a CUDA graph's Triton
// kernel is launched on the current CUDA stream.
//
// Inductor's CPU code generator compiles each kernel into a module whose
// `extern "C" void kernel(...)` takes pointers and int64 sizes; its Python
// binding calls it at once. On a provider that queues host functions on its
// streams (the host runtime), the wrapper calls this instead: the entry
// point is looked up once per kernel, the arguments become machine words
// (a tensor's data pointer, an integer), and the call is queued. It then
// runs in stream order, after the work queued before it (eager operators,
// extern kernels, copies) and before the work queued after it, without the
// calling thread waiting for the stream. Buffers the wrapper frees go back
// to the caching allocator, which hands them out again in stream order.

#include <ATen/core/Tensor.h>
#include <Python.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>
#include <dlfcn.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/utils/pybind.h>

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"
#include "python/compile_bindings.h"
#include "python/gil.h"
#include "runtime/host/memory_protection.h"
#include "runtime/runtime.h"

namespace torch_infini {
namespace {

namespace py = pybind11;

// Every argument of a generated kernel is a pointer or an int64_t: integer
// class, passed in the same registers and stack slots as a machine word on
// the ABIs below. The code generator queues only such kernels, with at most
// kMaxArgs arguments (_launch_host_kernel_max_args; none on other ABIs).
#if (defined(__x86_64__) || defined(__aarch64__)) && UINTPTR_MAX == UINT64_MAX
constexpr bool kWordArgsAbi = true;
#else
constexpr bool kWordArgsAbi = false;
#endif
constexpr size_t kMaxArgs = 64;
using Word = std::uintptr_t;
using Entry = void*;
using Caller = void (*)(Entry, const Word*);

template <size_t I>
using WordAt = Word;

template <size_t... I>
void call_entry(Entry entry, const Word* args, std::index_sequence<I...>) {
  using Fn = void (*)(WordAt<I>...);
  reinterpret_cast<Fn>(entry)(args[I]...);
}

template <size_t... N>
constexpr std::array<Caller, sizeof...(N)> make_callers(
    std::index_sequence<N...>) {
  return {+[](Entry entry, const Word* args) {
    call_entry(entry, args, std::make_index_sequence<N>{});
  }...};
}

// callers[n] calls an entry point with n word arguments.
constexpr auto callers = make_callers(std::make_index_sequence<kMaxArgs + 1>{});

struct HostKernel {
  Entry entry = nullptr;
  std::string name;  // the profiler's label: lives as long as the process
};

// The entry point behind a kernel's Python binding, found once: the
// binding's module was loaded from a shared library, whose `kernel` symbol
// it calls. The GIL, held by every caller, guards the table. Each binding
// gets a reference that is never dropped: it keeps the module, and so the
// library, loaded (Python never unloads one anyway), and the table holds no
// Python object to release after the interpreter has gone.
const HostKernel& host_kernel(PyObject* binding, PyObject* name) {
  static std::unordered_map<PyObject*, HostKernel> kernels;
  auto it = kernels.find(binding);
  if (it != kernels.end()) {
    return it->second;
  }
  const py::handle b(binding);
  const std::string label = py::str(name).cast<std::string>();
  TORCH_CHECK(py::hasattr(b, "__module__"), "_launch_host_kernel: ", label,
              " is not a generated kernel's binding");
  const py::object module = py::module_::import("sys").attr("modules").attr(
      "get")(b.attr("__module__"));
  TORCH_CHECK(!module.is_none() && py::hasattr(module, "__file__"),
              "_launch_host_kernel: the module of ", label,
              " was not loaded from a library");
  const std::string path = py::str(module.attr("__file__")).cast<std::string>();
  void* library = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  TORCH_CHECK(library != nullptr, "_launch_host_kernel: ", path,
              " is not loaded: ", dlerror());
  Entry entry = dlsym(library, "kernel");
  dlclose(library);  // the module holds its own reference
  TORCH_CHECK(entry != nullptr, "_launch_host_kernel: ", path,
              " has no kernel entry point");
  Py_INCREF(binding);
  return kernels.emplace(binding, HostKernel{entry, label}).first->second;
}

// A queued call: the entry point and its arguments, by value.
struct KernelCall {
  Entry entry;
  uint32_t count;
  c10::SmallVector<Word, 12> args;

  void operator()() const { callers[count](entry, args.data()); }
};

// _launch_host_kernel(binding, name, *args): queues binding's kernel with
// `args` (infini tensors and ints) on the current stream of the tensors'
// device; `name` labels it on the profiler's device timeline. A kernel that
// also takes CPU tensors runs at once, after a synchronize of that stream.
PyObject* launch_host_kernel(PyObject* /*self*/, PyObject* const* argv,
                             Py_ssize_t argc) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(kWordArgsAbi, "_launch_host_kernel: not supported on this "
              "platform's calling convention");
  TORCH_CHECK(argc >= 2 && static_cast<size_t>(argc - 2) <= kMaxArgs,
              "_launch_host_kernel(binding, name, *args) takes at most ",
              kMaxArgs, " kernel arguments");
  const HostKernel& kernel = host_kernel(argv[0], argv[1]);
  KernelCall call{kernel.entry, static_cast<uint32_t>(argc - 2), {}};
  c10::DeviceIndex device = -1;
  bool host_tensors = false;
  for (Py_ssize_t i = 2; i < argc; ++i) {
    PyObject* arg = argv[i];
    if (THPVariable_Check(arg)) {
      const at::Tensor& t = THPVariable_Unpack(arg);
      if (t.device().is_cpu()) {
        // A CPU tensor (an optimizer's step count, read by the kernel that
        // updates the parameters): its memory is not in stream order.
        host_tensors = true;
        call.args.push_back(reinterpret_cast<Word>(t.data_ptr()));
        continue;
      }
      TORCH_CHECK(t.device().type() == kInfini, "_launch_host_kernel: ",
                  kernel.name, " argument ", i - 2, " is on ", t.device(),
                  ", not on an infini device or the CPU");
      TORCH_CHECK(device < 0 || t.device().index() == device,
                  "_launch_host_kernel: ", kernel.name,
                  " has arguments on infini:", device, " and ", t.device());
      device = t.device().index();
      call.args.push_back(reinterpret_cast<Word>(t.data_ptr()));
    } else if (PyLong_Check(arg)) {
      const long long value = PyLong_AsLongLong(arg);
      if (value == -1 && PyErr_Occurred()) {
        return nullptr;
      }
      call.args.push_back(static_cast<Word>(static_cast<int64_t>(value)));
    } else {
      TORCH_CHECK(false, "_launch_host_kernel: ", kernel.name, " argument ",
                  i - 2, " is a ", Py_TYPE(arg)->tp_name,
                  ", not a tensor or an int");
    }
  }
  const c10::Stream stream = current_stream(device);
  auto& provider = runtime::provider();
  // Without the GIL: both may wait for the stream (a synchronize, a full
  // queue), and a thread running its tasks may need the GIL to finish one
  // (releasing a tensor that has a Python object, TensorImpl::
  // decref_pyobject).
  python::without_gil([&] {
    if (host_tensors) {
      // Run now, after the stream's work, as the CPU would run it: a CPU
      // tensor may be written by the caller before a queued kernel read it.
      provider.stream_synchronize(stream.device_index(),
                                  native_stream(stream));
      const runtime::host::DeviceMemoryAccess kernel_run;  // on this thread
      call();
    } else {
      provider.launch_host_func(stream.device_index(), native_stream(stream),
                                std::move(call), kernel.name.c_str());
    }
  });
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef launch_def = {
    "_launch_host_kernel", reinterpret_cast<PyCFunction>(
                               reinterpret_cast<void (*)()>(launch_host_kernel)),
    METH_FASTCALL,
    "_launch_host_kernel(binding, name, *args): queues a compiled graph's "
    "generated C++ kernel (binding: its Python binding) with args (infini "
    "tensors, ints) on the current infini stream."};

}  // namespace

void bind_host_kernel_launch(py::module& m) {
  m.attr("_launch_host_kernel") =
      py::reinterpret_steal<py::object>(PyCFunction_New(&launch_def, nullptr));
  // What the code generator may queue (torch_infini/_compile.py).
  m.attr("_launch_host_kernel_max_args") = kWordArgsAbi ? kMaxArgs : 0;
  // Around a generated kernel run on the calling thread, where the host
  // runtime protects its device memory (runtime/host/memory_protection.h).
  m.def("_begin_device_memory_access",
        &runtime::host::begin_device_memory_access);
  m.def("_end_device_memory_access", &runtime::host::end_device_memory_access);
}

}  // namespace torch_infini
