#pragma once

// Device management for the infini device: count, current device (per
// thread, like CUDA's), index checks.

#include <c10/core/Device.h>

namespace torch_infini {

constexpr c10::DeviceType kInfini = c10::DeviceType::PrivateUse1;

// The number of devices; 0 (with a warning) when the runtime could not start.
// noexcept because PyTorch's device guard interface requires it.
c10::DeviceIndex device_count() noexcept;
// The number of devices, or the error that kept the runtime from starting (a
// malformed TORCH_INFINI_* variable, a provider that is not compiled in):
// what torch.infini.device_count() and is_available() report.
c10::DeviceIndex checked_device_count();
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
