#pragma once

// The thread-local state in which the host runtime runs a CPU kernel for a
// device call, wherever it runs: on a stream's worker, on a caller running
// queued tasks or a call at once (runtime/host/host_stream.h), or a call's
// direct first run (runtime/host/host_direct.h). It is a fresh thread's,
// which is what the worker has. The caller may be under no_grad,
// inference_mode, autocast, a TorchDispatchMode or a functorch transform
// (thread-local dispatch keys and autograd flags), or under a profiler (its
// thread-local RecordFunction callbacks); the CPU kernel must see none of
// them. They applied to the device call already: autocast to CPU's dtype
// would recast the CPU aliases of an infini call that autocast left alone
// (a direct run under torch.autocast("cpu") once returned bfloat16 where
// the call's metadata, and CUDA, say float32), a Python mode would be
// entered without the GIL, and the profiler would record the caller's op a
// second time, inside its kernel. Global RecordFunction callbacks still
// apply, as they do on the worker. OpenMP's per-thread settings stay the
// caller's: its kernels then use the caller's intra-op threads, as CPU
// eager would (see worker_intra_op_threads in host_stream.h).

#include <ATen/record_function.h>
#include <c10/core/AutogradState.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <optional>

namespace torch_infini::runtime::host {

class KernelThreadState {
 public:
  KernelThreadState();
  ~KernelThreadState();
  KernelThreadState(const KernelThreadState&) = delete;
  KernelThreadState& operator=(const KernelThreadState&) = delete;

 private:
  c10::impl::ForceDispatchKeyGuard keys_;
  c10::AutogradState& state_;
  const bool grad_mode_;
  const bool inference_mode_;
  const bool fw_grad_mode_;
  std::optional<at::RecordFunctionTLS> record_functions_;  // the caller's
};

}  // namespace torch_infini::runtime::host
