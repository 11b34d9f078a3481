#pragma once

// Device management for the infini device: count, current device (per
// thread, like CUDA's), index checks.

#include <c10/core/Device.h>

namespace torch_infini {

constexpr c10::DeviceType kInfini = c10::DeviceType::PrivateUse1;

c10::DeviceIndex device_count() noexcept;
// The calling thread's current device (0 until set).
c10::DeviceIndex current_device();
void set_device(c10::DeviceIndex device);
// Raises, naming the index and the device count, unless 0 <= device < count.
void check_device(c10::DeviceIndex device);
// `device` if it is >= 0, else the current device.
c10::DeviceIndex resolve_device(c10::DeviceIndex device);
// True once this process has used a device (set a device, allocated, used a
// stream), as torch.cuda.is_initialized(); counting devices does not count.
bool is_initialized() noexcept;
void mark_initialized() noexcept;

}  // namespace torch_infini
