// The operators AOTInductor's generated code calls to keep its C++ kernels
// in stream order (torch_infini/_aoti.py). A model library cannot link to
// torch_infini._C (Python loads extensions privately), so it reaches them
// through PyTorch's C shim: aoti_torch_call_dispatcher("infini::...").
//
//   infini::_synchronize_current_stream()   waits for the work queued on
//       the current stream of the current device, before a kernel that
//       runs on the calling thread over device memory (what the Python
//       wrapper does with _C._synchronize_current_stream);
//   infini::_begin_device_memory_access(), infini::_end_device_memory_access()
//       bracket such a kernel where the host runtime protects its device
//       memory (runtime/host/memory_protection.h); nothing elsewhere.
//
// They take no tensors: the dispatcher runs their catch-all kernels.

#include <Python.h>
#include <torch/library.h>

#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"
#include "python/gil.h"
#include "runtime/host/memory_protection.h"
#include "runtime/runtime.h"

namespace torch_infini {
namespace {

void synchronize_current_stream() {
  const c10::Stream s = current_stream(-1);
  auto wait = [&] {
    runtime::provider().stream_synchronize(s.device_index(), native_stream(s));
  };
  // Called from Python (a loaded package's __call__) or from C++ alone.
  if (Py_IsInitialized() && PyGILState_Check()) {
    python::without_gil(wait);
  } else {
    wait();
  }
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(infini, m) {
  m.def("_synchronize_current_stream() -> ()", &synchronize_current_stream);
  m.def("_begin_device_memory_access() -> ()",
        &runtime::host::begin_device_memory_access);
  m.def("_end_device_memory_access() -> ()",
        &runtime::host::end_device_memory_access);
}

}  // namespace torch_infini
