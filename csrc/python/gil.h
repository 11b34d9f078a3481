#pragma once

// Releasing the GIL around a call that may block for long (synchronize,
// empty_cache), and taking it back in ordinary code rather than in a guard's
// destructor.
//
// Why: on CPython up to 3.13, a daemon thread that tries to take the GIL
// back while the interpreter is finalizing is ended with pthread_exit. When
// that happens inside a destructor (pybind11::gil_scoped_release), the forced
// unwind leaves a noexcept function and the C++ runtime aborts the process
// ("terminate called without an active exception"). Taken back here, the
// forced unwind passes through ordinary frames (pybind11's dispatcher lets it
// through) and the thread ends cleanly, as a pure-Python daemon thread does.

#include <Python.h>

#include <exception>
#include <utility>

namespace torch_infini::python {

// Runs `f` (returning nothing) with the GIL released; rethrows what it threw
// once the GIL is held again.
template <typename F>
void without_gil(F&& f) {
  PyThreadState* state = PyEval_SaveThread();
  std::exception_ptr failure;
  try {
    std::forward<F>(f)();
  } catch (...) {
    failure = std::current_exception();
  }
  PyEval_RestoreThread(state);  // may end this thread at finalization
  if (failure) {
    std::rethrow_exception(failure);
  }
}

}  // namespace torch_infini::python
