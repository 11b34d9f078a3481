#include "core/InfiniGuard.h"

#include <c10/util/Exception.h>

#include "core/InfiniAllocator.h"
#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"
#include "runtime/runtime.h"

namespace torch_infini {
namespace {

void check_infini(c10::Device device) {
  TORCH_CHECK(device.type() == kInfini, "expected an infini device, got ",
              device);
}

}  // namespace

c10::DeviceType InfiniGuardImpl::type() const {
  return kInfini;
}

c10::Device InfiniGuardImpl::exchangeDevice(c10::Device device) const {
  check_infini(device);
  const c10::DeviceIndex old = current_device();
  if (device.index() != old) {
    set_device(device.index());
  }
  return c10::Device(kInfini, old);
}

c10::Device InfiniGuardImpl::getDevice() const {
  return c10::Device(kInfini, current_device());
}

void InfiniGuardImpl::setDevice(c10::Device device) const {
  check_infini(device);
  set_device(device.index());
}

void InfiniGuardImpl::uncheckedSetDevice(c10::Device device) const noexcept {
  // A guard restoring the device it found, which it did not change (every
  // generic-kernel call on the current device): nothing to validate or set,
  // as CUDA's SetDevice returns early for the current device.
  if (device.index() == current_device()) {
    return;
  }
  if (device_count() == 0) {
    return;  // nothing to restore; the failure was already reported
  }
  try {
    set_device(device.index());
  } catch (const c10::Error& e) {
    TORCH_WARN("infini: could not restore device ", device, ": ",
               e.what_without_backtrace());
  }
}

c10::Stream InfiniGuardImpl::getStream(c10::Device device) const {
  return current_stream(device.index());
}

c10::Stream InfiniGuardImpl::getDefaultStream(c10::Device device) const {
  return default_stream(device.index());
}

c10::Stream InfiniGuardImpl::getStreamFromGlobalPool(
    c10::Device device, bool is_high_priority) const {
  return stream_from_pool(
      is_high_priority ? kHighestStreamPriority : kLowestStreamPriority,
      device.index());
}

c10::Stream InfiniGuardImpl::getNewStream(c10::Device device,
                                          int priority) const {
  return stream_from_pool(priority, device.index());
}

c10::Stream InfiniGuardImpl::exchangeStream(c10::Stream stream) const {
  const c10::Stream old = current_stream(stream.device_index());
  set_current_stream(stream);
  return old;
}

c10::DeviceIndex InfiniGuardImpl::deviceCount() const noexcept {
  return device_count();
}

void InfiniGuardImpl::record(void** event, const c10::Stream& stream,
                             const c10::DeviceIndex device_index,
                             const c10::EventFlag flag) const {
  TORCH_CHECK(device_index == -1 || device_index == stream.device_index(),
              "Event device index ", static_cast<int>(device_index),
              " does not match recording stream's device index ",
              static_cast<int>(stream.device_index()), ".");
  auto& rt = runtime::provider();
  const c10::DeviceIndex device = stream.device_index();
  if (*event == nullptr) {
    *event = rt.event_create(device, flag == c10::EventFlag::BACKEND_DEFAULT,
                             /*blocking=*/false);
  }
  rt.event_record(device, *event, native_stream(stream));
}

void InfiniGuardImpl::block(void* event, const c10::Stream& stream) const {
  if (event == nullptr) {
    return;  // never recorded: nothing to wait for
  }
  runtime::provider().stream_wait_event(stream.device_index(),
                                        native_stream(stream), event);
}

bool InfiniGuardImpl::queryEvent(void* event) const {
  return event == nullptr ||
      runtime::provider().event_query(current_device(), event);
}

void InfiniGuardImpl::destroyEvent(void* event,
                                   const c10::DeviceIndex device_index) const
    noexcept {
  if (event == nullptr) {
    return;
  }
  try {
    runtime::provider().event_destroy(device_index < 0 ? current_device()
                                                       : device_index,
                                      event);
  } catch (const std::exception& e) {
    TORCH_WARN("infini: failed to destroy an event: ", e.what());
  }
}

void InfiniGuardImpl::synchronizeEvent(void* event) const {
  if (event != nullptr) {
    runtime::provider().event_synchronize(current_device(), event);
  }
}

double InfiniGuardImpl::elapsedTime(void* start, void* end,
                                    const c10::DeviceIndex device_index) const {
  TORCH_CHECK(start != nullptr && end != nullptr,
              "Both events must be recorded before calculating elapsed time.");
  return runtime::provider().event_elapsed_ms(
      device_index < 0 ? current_device() : device_index, start, end);
}

bool InfiniGuardImpl::queryStream(const c10::Stream& stream) const {
  return runtime::provider().stream_query(stream.device_index(),
                                          native_stream(stream));
}

void InfiniGuardImpl::synchronizeStream(const c10::Stream& stream) const {
  runtime::provider().stream_synchronize(stream.device_index(),
                                         native_stream(stream));
}

void InfiniGuardImpl::synchronizeDevice(
    const c10::DeviceIndex device_index) const {
  runtime::provider().device_synchronize(resolve_device(device_index));
}

c10::DeviceCapability InfiniGuardImpl::getDeviceCapability(
    c10::Device device) const {
  resolve_device(device.index());  // an index past the devices raises
  c10::DeviceCapability capability;  // every dtype
  auto& dtypes = capability.capability_data.supported_scalar_types;
  dtypes.has_QInt8 = 0;
  dtypes.has_QUInt8 = 0;
  dtypes.has_QInt32 = 0;
  dtypes.has_QUInt4x2 = 0;
  dtypes.has_QUInt2x4 = 0;
  return capability;
}

void InfiniGuardImpl::recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                                            const c10::Stream& stream) const {
  allocator::record_stream(data_ptr, stream);
}

C10_REGISTER_GUARD_IMPL(PrivateUse1, InfiniGuardImpl);

}  // namespace torch_infini
