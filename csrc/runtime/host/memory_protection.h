#pragma once

// The host runtime's device memory as strict as a discrete accelerator's:
// TORCH_INFINI_PROTECT_DEVICE_MEMORY=1 makes every device allocation
// unreadable and unwritable to the process, except to the runtime's own
// kernels and copies while they run. A host touch of device memory
// anywhere else (a data_ptr() dereferenced in C++, ctypes on a tensor's
// address, a kernel given the wrong pointer) faults at once, with a
// message on stderr naming the address as infini device memory and the
// operator the thread was running, where there was one; on a discrete
// device it would crash or read garbage, later and elsewhere.
//
// How: memory protection keys (x86 PKU). Device allocations are mapped
// pages tagged with one key; access to the key is a per-thread right (the
// PKRU register), off in every thread by default. A thread running the
// runtime's work (a stream's worker or a caller running queued tasks, a
// direct run on the calling thread) turns it on for that scope
// (DeviceMemoryAccess), and once for good in the OpenMP threads of its
// intra-op pool, which run its kernels' parallel regions. Pinned host memory
// is not device memory and stays readable. Without PKU (another CPU, an
// old kernel) the mode is refused at its first allocation, saying why.

#include <cstddef>

namespace torch_infini::runtime::host {

// Whether TORCH_INFINI_PROTECT_DEVICE_MEMORY=1 (read once).
bool memory_protection_on();

// Device memory in the mode: whole pages, tagged with the key.
void* protected_malloc(size_t bytes);
void protected_free(void* ptr, size_t bytes);

// Tags a mapping made elsewhere (shared device memory) with the key, so it
// is as unreachable as protected_malloc's pages; false if the kernel refused.
bool protect_mapping(void* ptr, size_t bytes);

// The calling thread may touch device memory while this lives (nestable;
// nothing where the mode is off).
class DeviceMemoryAccess {
 public:
  DeviceMemoryAccess();
  ~DeviceMemoryAccess();
  DeviceMemoryAccess(const DeviceMemoryAccess&) = delete;
  DeviceMemoryAccess& operator=(const DeviceMemoryAccess&) = delete;

 private:
  bool changed_ = false;
};

// The same for code that cannot hold a scope object: a compiled graph's
// kernel run on the calling thread, between two lines of Python.
void begin_device_memory_access();
void end_device_memory_access();

}  // namespace torch_infini::runtime::host
