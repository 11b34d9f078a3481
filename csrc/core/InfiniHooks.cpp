// PrivateUse1 hooks: how ATen asks about availability, devices, pointers,
// generators and pinned memory for the infini device.

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Allocator.h>
#include <c10/util/Exception.h>

#include "core/InfiniAllocator.h"
#include "core/InfiniFunctions.h"
#include "core/InfiniGenerator.h"
#include "core/InfiniHooks.h"

namespace torch_infini {
namespace {

struct InfiniHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }

  bool isAvailable() const override { return device_count() > 0; }

  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    return is_initialized() && device_index >= 0 &&
        device_index < device_count();
  }

  void init() const override { device_count(); }

  c10::DeviceIndex deviceCount() const override { return device_count(); }

  void setCurrentDevice(c10::DeviceIndex device) const override {
    set_device(device);
  }

  c10::DeviceIndex getCurrentDevice() const override {
    return current_device();
  }

  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex old = current_device();
    set_device(device);
    return old;
  }

  c10::DeviceIndex maybeExchangeDevice(
      c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const c10::DeviceIndex device = allocator::device_of_pointer(data);
    TORCH_CHECK(device >= 0,
                "infini: the pointer was not allocated by the infini device "
                "allocator");
    return at::Device(kInfini, device);
  }

  const at::Generator& getDefaultGenerator(
      c10::DeviceIndex device_index) const override {
    return default_generator(device_index);
  }

  at::Generator getNewGenerator(
      c10::DeviceIndex device_index) const override {
    return new_generator(device_index);
  }

  bool isPinnedPtr(const void* data) const override {
    return pinned_memory_hooks().is_pinned(data);
  }

  at::Allocator* getPinnedMemoryAllocator() const override {
    return pinned_memory_hooks().allocator();
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage,
                              size_t new_bytes) const override {
    resize_storage_bytes(storage, new_bytes);
  }
};

InfiniHooks hooks;

}  // namespace

c10::Allocator* PinnedMemoryHooks::allocator() const {
  TORCH_CHECK_NOT_IMPLEMENTED(
      pinned_allocator != nullptr,
      "infini: pinned host memory is not available in this build yet; use "
      "pageable CPU tensors (copies to infini then complete synchronously)");
  return pinned_allocator;
}

PinnedMemoryHooks& pinned_memory_hooks() {
  static PinnedMemoryHooks instance;
  return instance;
}

void register_hooks() {
  at::RegisterPrivateUse1HooksInterface(&hooks);
}

}  // namespace torch_infini
