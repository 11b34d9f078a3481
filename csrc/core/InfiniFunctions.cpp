#include "core/InfiniFunctions.h"

#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>

#include "runtime/runtime.h"

namespace torch_infini {
namespace {

thread_local c10::DeviceIndex tls_current_device = 0;
std::atomic<bool> initialized{false};

// Why the runtime could not start (a malformed TORCH_INFINI_* variable, a
// broken Infini stack), repeated by every later device error.
std::string& init_error() {
  static std::string message;
  return message;
}

// The device count, computed once; 0 when the runtime could not start.
c10::DeviceIndex counted_devices() noexcept {
  static const c10::DeviceIndex count = [] {
    try {
      return static_cast<c10::DeviceIndex>(runtime::provider().device_count());
    } catch (const c10::Error& e) {
      init_error() = e.what_without_backtrace();
    } catch (const std::exception& e) {
      init_error() = e.what();
    }
    return static_cast<c10::DeviceIndex>(0);
  }();
  return count;
}

}  // namespace

c10::DeviceIndex device_count() noexcept {
  const auto count = counted_devices();
  if (!init_error().empty()) {
    // PyTorch's generic paths (the device guard, torch.accelerator) cannot
    // take an exception here: they see 0 devices, and the reason once.
    static std::once_flag warned;
    std::call_once(warned, [] {
      TORCH_WARN("infini: the runtime could not be initialized: ",
                 init_error());
    });
  }
  return count;
}

c10::DeviceIndex checked_device_count() {
  const auto count = counted_devices();
  TORCH_CHECK(init_error().empty(),
              "infini: the runtime could not be initialized: ", init_error());
  return count;
}

bool is_initialized() noexcept {
  // A child forked after the runtime started has none of it (as
  // torch.cuda.is_initialized() is False there).
  return initialized.load(std::memory_order_relaxed) && !runtime::in_bad_fork();
}

void mark_initialized() noexcept {
  if (!initialized.load(std::memory_order_relaxed)) {
    initialized.store(true);
  }
}

void check_device(c10::DeviceIndex device) {
  const auto count = counted_devices();  // the error below says why, no warning
  TORCH_CHECK(count > 0, "infini: no infini device is available",
              init_error().empty() ? "" : ": ", init_error());
  TORCH_CHECK(device >= 0 && device < count, "Invalid device index ",
              static_cast<int>(device), ": infini has ",
              static_cast<int>(count), " device(s), valid indices are 0..",
              static_cast<int>(count) - 1);
}

c10::DeviceIndex current_device() {
  return tls_current_device;
}

void set_device(c10::DeviceIndex device) {
  check_device(device);
  mark_initialized();
  if (tls_current_device != device) {
    runtime::provider().set_device(device);
    tls_current_device = device;
  }
}

c10::DeviceIndex resolve_device(c10::DeviceIndex device) {
  if (device < 0) {
    return current_device();
  }
  check_device(device);
  return device;
}

}  // namespace torch_infini
