#include "runtime/host/host_ipc.h"

#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "runtime/host/host_provider.h"
#include "runtime/host/host_stream.h"
#include "runtime/host/memory_protection.h"

namespace torch_infini::runtime::host {
namespace {

size_t mapped_length(size_t bytes) {
  // A zero-byte storage still gets a page: mmap refuses a zero length.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return bytes == 0 ? page : (bytes + page - 1) / page * page;
}

// Maps `fd` into this process; takes the descriptor over (closed on error).
SharedDeviceMemory map(int fd, size_t bytes, const char* what) {
  void* ptr = mmap(nullptr, mapped_length(bytes), PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
  if (ptr == MAP_FAILED) {
    const int error = errno;
    close(fd);
    TORCH_CHECK(false, "infini host runtime: ", what, ": mapping ", bytes,
                " bytes of shared device memory failed: ", strerror(error));
  }
  if (memory_protection_on() && !protect_mapping(ptr, mapped_length(bytes))) {
    const int error = errno;
    munmap(ptr, mapped_length(bytes));
    close(fd);
    TORCH_CHECK(false, "infini host runtime: ", what,
                ": tagging shared device memory for the protection mode "
                "failed: ", strerror(error));
  }
  return {ptr, bytes, fd};
}

}  // namespace

SharedDeviceMemory allocate_shared(size_t bytes) {
  const int fd = memfd_create("torch_infini_shared", MFD_CLOEXEC);
  TORCH_CHECK(fd >= 0, "infini host runtime: sharing device memory: "
              "memfd_create failed: ", strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(mapped_length(bytes))) != 0) {
    const int error = errno;
    close(fd);
    TORCH_CHECK(false, "infini host runtime: sharing ", bytes,
                " bytes of device memory failed: ", strerror(error),
                " (is /dev/shm or the memory limit full?)");
  }
  return map(fd, bytes, "sharing device memory");
}

SharedDeviceMemory open_shared(int fd, size_t bytes) {
  return map(fd, bytes, "opening device memory shared by another process");
}

void release_shared(HostProvider& provider, int device,
                    const SharedDeviceMemory& memory) {
  // Kernels queued before the last reference went away may still use the
  // memory: it is unmapped once every stream of the device has run past
  // this point, by whichever thread finishes the last of them. Never waited
  // for here: the last reference often goes away on a Python thread that
  // holds the GIL, which a thread running the queued work may need to
  // finish a task (TensorImpl::decref_pyobject).
  class Unmap {
   public:
    explicit Unmap(const SharedDeviceMemory& memory) : memory_(memory) {}
    Unmap(const Unmap&) = delete;
    Unmap& operator=(const Unmap&) = delete;
    ~Unmap() {
      munmap(memory_.ptr, mapped_length(memory_.bytes));
      close(memory_.fd);
    }

   private:
    const SharedDeviceMemory memory_;
  };
  auto unmap = std::make_shared<Unmap>(memory);
  for (HostStream* s : provider.device_streams(device)) {
    s->enqueue_release([unmap] {});
  }
}

}  // namespace torch_infini::runtime::host
