#pragma once

// The device guard of the infini device: how PyTorch's generic code
// (c10::DeviceGuard, c10::StreamGuard, torch.Stream, torch.Event,
// torch.accelerator) reaches our devices, streams and events.

#include <c10/core/impl/DeviceGuardImplInterface.h>

namespace torch_infini {

struct InfiniGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  c10::DeviceType type() const override;
  c10::Device exchangeDevice(c10::Device device) const override;
  c10::Device getDevice() const override;
  void setDevice(c10::Device device) const override;
  void uncheckedSetDevice(c10::Device device) const noexcept override;
  c10::Stream getStream(c10::Device device) const override;
  c10::Stream getDefaultStream(c10::Device device) const override;
  c10::Stream getStreamFromGlobalPool(c10::Device device,
                                      bool is_high_priority) const override;
  c10::Stream getNewStream(c10::Device device, int priority) const override;
  c10::Stream exchangeStream(c10::Stream stream) const override;
  c10::DeviceIndex deviceCount() const noexcept override;

  void record(void** event, const c10::Stream& stream,
              const c10::DeviceIndex device_index,
              const c10::EventFlag flag) const override;
  void block(void* event, const c10::Stream& stream) const override;
  bool queryEvent(void* event) const override;
  void destroyEvent(void* event,
                    const c10::DeviceIndex device_index) const noexcept override;
  void synchronizeEvent(void* event) const override;
  double elapsedTime(void* start, void* end,
                     const c10::DeviceIndex device_index) const override;

  bool queryStream(const c10::Stream& stream) const override;
  void synchronizeStream(const c10::Stream& stream) const override;
  void synchronizeDevice(const c10::DeviceIndex device_index) const override;
  void recordDataPtrOnStream(const c10::DataPtr& data_ptr,
                             const c10::Stream& stream) const override;
  // torch.accelerator.get_device_capability: every dtype but the quantized
  // ones (quantized tensors are refused on infini).
  c10::DeviceCapability getDeviceCapability(c10::Device device) const override;
};

}  // namespace torch_infini
