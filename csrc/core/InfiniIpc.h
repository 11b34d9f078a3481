#pragma once

// Infini storages shared between processes (torch.multiprocessing), with
// CUDA's semantics: the receiver maps the sender's memory, so writes on
// either side are seen by the other once the writer's work is done, and the
// memory lives while any process holds it.
//
// Sharing moves the storage into shared device memory (runtime/ipc.h) the
// first time, as CPU's share_memory_ moves a CPU storage into shared memory:
// every view of it keeps working, now on memory other processes can map.

#include <c10/core/Storage.h>

#include <cstddef>
#include <string>

namespace torch_infini::ipc {

struct SharedStorage {
  c10::DeviceIndex device;
  int fd;        // the storage's own descriptor: valid while it lives
                 // (as CPU's _share_fd_cpu_ returns), never closed by callers
  size_t bytes;  // the storage's size
};

// Shares `storage` (an infini storage): after the work queued on its device
// so far, it is in shared memory; returns the descriptor naming that memory.
// Raises where the provider cannot share, saying why and what to do instead.
SharedStorage share(const c10::Storage& storage);

// A storage over memory another process shared (`fd` is taken over),
// mapped in this process, not resizable (as CUDA's received storages).
c10::Storage open(c10::DeviceIndex device, int fd, size_t bytes);

// Empty where infini tensors can be shared; otherwise why not.
std::string unsupported_reason();

}  // namespace torch_infini::ipc
