#pragma once

// The host runtime's shared device memory (runtime/ipc.h): an anonymous
// memory file (memfd) mapped MAP_SHARED, so a process given its descriptor
// maps the very same pages.

#include "runtime/ipc.h"

namespace torch_infini::runtime::host {

class HostProvider;

SharedDeviceMemory allocate_shared(size_t bytes);
SharedDeviceMemory open_shared(int fd, size_t bytes);
void release_shared(HostProvider& provider, int device,
                    const SharedDeviceMemory& memory);

}  // namespace torch_infini::runtime::host
