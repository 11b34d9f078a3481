#include "runtime/ipc.h"

#include <c10/util/Exception.h>
#include <unistd.h>

#include "runtime/host/host_ipc.h"
#include "runtime/host/host_provider.h"
#include "runtime/runtime.h"

namespace torch_infini::runtime {
namespace {

// The host provider serving the device, or nullptr where another does.
host::HostProvider* host_provider() {
  return dynamic_cast<host::HostProvider*>(&provider());
}

void check_supported() {
  const std::string reason = shared_memory_unsupported_reason();
  TORCH_CHECK(reason.empty(), reason);
}

}  // namespace

std::string shared_memory_unsupported_reason() {
  if (host_provider() != nullptr) {
    return {};
  }
  Provider& p = provider();
  return std::string("torch.multiprocessing cannot share infini tensors "
                     "between processes on the ") + p.name() + "/" +
         p.backend() + " provider: InfiniRT has no IPC API to share device "
         "memory. Send a CPU copy instead (tensor.cpu(), and .to('infini') "
         "in the receiving process), share a CPU tensor's memory "
         "(tensor.cpu().share_memory_()), or exchange tensors with "
         "torch.distributed (backend 'infini').";
}

SharedDeviceMemory allocate_shared_memory(int /*device*/, size_t bytes) {
  check_supported();
  return host::allocate_shared(bytes);
}

SharedDeviceMemory open_shared_memory(int /*device*/, int fd, size_t bytes) {
  const std::string reason = shared_memory_unsupported_reason();
  if (!reason.empty()) {
    close(fd);
    TORCH_CHECK(false, reason);
  }
  return host::open_shared(fd, bytes);
}

void release_shared_memory(int device, const SharedDeviceMemory& memory) {
  host::HostProvider* host = host_provider();
  TORCH_INTERNAL_ASSERT(host != nullptr,
                        "shared device memory without the host provider");
  host::release_shared(*host, device, memory);
}

}  // namespace torch_infini::runtime
