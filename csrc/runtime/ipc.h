#pragma once

// Device memory shared between processes: what torch.multiprocessing needs
// to send an infini tensor to another process as CUDA sends a cuda tensor
// (the receiver maps the same memory, so its in-place writes are the
// sender's), and what the providers can do of it.
//
// Shared memory here is a file descriptor naming the memory plus a mapping
// of it in this process. The memory lives while any process holds a mapping
// or a descriptor, so no reference counting across processes is needed
// (CUDA's IPC needs one because its handles do not keep memory alive).

#include <cstddef>
#include <string>

namespace torch_infini::runtime {

struct SharedDeviceMemory {
  void* ptr = nullptr;  // the mapping in this process
  size_t bytes = 0;
  int fd = -1;          // owned: closed by release_shared_memory
};

// Empty where the selected provider can share device memory; otherwise why
// it cannot, naming the provider and what to do instead.
std::string shared_memory_unsupported_reason();

// New device memory on `device` that other processes can map. Raises with
// the reason above where the provider cannot share.
SharedDeviceMemory allocate_shared_memory(int device, size_t bytes);

// Maps memory another process shared (`fd`, which this call takes over).
SharedDeviceMemory open_shared_memory(int device, int fd, size_t bytes);

// Unmaps once the work already queued on the device's streams is done (a
// kernel may still use the memory), without reporting those streams'
// pending errors: they belong to the user's next synchronizing call.
void release_shared_memory(int device, const SharedDeviceMemory& memory);

}  // namespace torch_infini::runtime
