#include "core/InfiniIpc.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/StorageImpl.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>
#include <memory>

#include "core/InfiniStream.h"
#include "runtime/ipc.h"
#include "runtime/runtime.h"

namespace torch_infini::ipc {
namespace {

constexpr c10::DeviceType kInfini = c10::DeviceType::PrivateUse1;

struct SharedContext {
  c10::DeviceIndex device;
  runtime::SharedDeviceMemory memory;
};

void delete_shared(void* ctx) {
  std::unique_ptr<SharedContext> owned(static_cast<SharedContext*>(ctx));
  if (runtime::in_bad_fork()) {
    return;  // a forked child leaves the parent's memory alone
  }
  try {
    runtime::release_shared_memory(owned->device, owned->memory);
  } catch (const std::exception& e) {
    LOG(WARNING) << "torch_infini: releasing shared device memory: "
                 << e.what();
  }
}

c10::DataPtr shared_data_ptr(c10::DeviceIndex device,
                             const runtime::SharedDeviceMemory& memory) {
  auto ctx = std::make_unique<SharedContext>(SharedContext{device, memory});
  void* ptr = memory.ptr;
  return {ptr, ctx.release(), &delete_shared, c10::Device(kInfini, device)};
}

}  // namespace

std::string unsupported_reason() {
  return runtime::shared_memory_unsupported_reason();
}

SharedStorage share(const c10::Storage& storage) {
  TORCH_CHECK(storage.device_type() == kInfini,
              "torch_infini: sharing a storage that is not on infini (",
              storage.device(), ")");
  const c10::DeviceIndex device = storage.device().index();
  const size_t bytes = storage.nbytes();
  const c10::DataPtr& current = storage.data_ptr();
  if (current.get_deleter() == &delete_shared) {
    const auto* ctx = static_cast<const SharedContext*>(current.get_context());
    return {device, ctx->memory.fd, bytes};
  }
  const std::string reason = unsupported_reason();
  TORCH_CHECK(reason.empty(), reason);
  c10::DeviceGuard guard(c10::Device(kInfini, device));
  runtime::SharedDeviceMemory memory =
      runtime::allocate_shared_memory(device, bytes);
  c10::DataPtr shared = shared_data_ptr(device, memory);
  // After the work already queued on every stream (any may write the
  // storage), so the copy and the receiver see its final values; the old
  // block goes back to the allocator once the copy is done.
  runtime::provider().device_synchronize(device);
  if (bytes > 0) {
    const runtime::StreamHandle stream = native_stream(current_stream(device));
    runtime::provider().memcpy_async(device, memory.ptr, current.get(), bytes,
                                     runtime::MemcpyKind::kDeviceToDevice,
                                     stream);
    runtime::provider().stream_synchronize(device, stream);
  }
  storage.unsafeGetStorageImpl()->set_data_ptr_noswap(std::move(shared));
  return {device, memory.fd, bytes};
}

c10::Storage open(c10::DeviceIndex device, int fd, size_t bytes) {
  c10::DeviceGuard guard(c10::Device(kInfini, device));
  runtime::SharedDeviceMemory memory =
      runtime::open_shared_memory(device, fd, bytes);
  return c10::Storage(c10::make_intrusive<c10::StorageImpl>(
      c10::StorageImpl::use_byte_size_t(), bytes,
      shared_data_ptr(device, memory), /*allocator=*/nullptr,
      /*resizable=*/false));
}

}  // namespace torch_infini::ipc
