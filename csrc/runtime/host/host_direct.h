#pragma once

// How the host runtime runs a generic-kernel call (runtime/generic_call.h):
// the first call of each kind (overload, argument metadata and values, the
// state its kernels read) runs directly: the stream is waited for, ATen's
// CPU kernel runs on the calling thread over aliases of device memory, and
// CPU's own errors are raised at the call. Its outputs' metadata is cached
// (runtime/layout_cache.h), and later calls of that kind are queued with it
// on the stream's worker, running nothing on the calling thread. Calls
// whose results depend on the data (x[mask], nonzero), whose written
// arguments overlap their inputs, or that return sparse tensors always run
// directly; during a graph capture nothing runs directly, and a first call
// is laid out by a meta run instead.

#include "runtime/generic_call.h"

namespace torch_infini::runtime::host {

// Serves `call` as above (HostKernels::serve).
void serve_directly_first(GenericCall& call);

}  // namespace torch_infini::runtime::host
