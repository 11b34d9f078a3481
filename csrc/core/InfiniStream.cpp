#include "core/InfiniStream.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "core/InfiniFunctions.h"

namespace torch_infini {
namespace {

constexpr int kPriorityLevels = 2;
constexpr int kMaxStreamId = kPriorityLevels * kStreamsPerPool;
// More than any real process uses; thread-local arrays are sized by it.
constexpr int kMaxDevices = 64;

struct DevicePool {
  std::array<std::once_flag, kMaxStreamId> once;
  // Atomic so that stream_id_of_handle may read slots being created.
  std::array<std::atomic<runtime::StreamHandle>, kMaxStreamId> handles{};
  std::array<std::atomic<uint32_t>, kPriorityLevels> next{};
};

DevicePool& pool(c10::DeviceIndex device) {
  static std::vector<std::unique_ptr<DevicePool>> pools = [] {
    std::vector<std::unique_ptr<DevicePool>> v;
    for (int i = 0; i < device_count(); ++i) {
      v.push_back(std::make_unique<DevicePool>());
    }
    return v;
  }();
  check_device(device);
  return *pools[device];
}

// Current stream id per device for this thread; -1 means "default stream".
thread_local std::array<c10::StreamId, kMaxDevices> tls_current = [] {
  std::array<c10::StreamId, kMaxDevices> a{};
  a.fill(0);
  return a;
}();

c10::Stream make_stream(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kInfini, device), id);
}

}  // namespace

void check_stream(const c10::Stream& stream) {
  TORCH_CHECK(stream.device_type() == kInfini,
              "expected an infini stream, got a stream of device type ",
              stream.device_type());
  check_device(stream.device_index());
  TORCH_CHECK(stream.id() >= 0 && stream.id() <= kMaxStreamId,
              "invalid infini stream id ", stream.id());
}

c10::Stream current_stream(c10::DeviceIndex device) {
  device = resolve_device(device);
  mark_initialized();
  TORCH_CHECK(device < kMaxDevices, "infini supports at most ", kMaxDevices,
              " devices");
  return make_stream(device, tls_current[device]);
}

c10::Stream current_stream_of_valid_device(c10::DeviceIndex device) {
  // Only the bound of this file's table: the index itself is the caller's.
  TORCH_CHECK(device >= 0 && device < kMaxDevices, "infini supports at most ",
              kMaxDevices, " devices");
  return make_stream(device, tls_current[device]);
}

c10::Stream default_stream(c10::DeviceIndex device) {
  return make_stream(resolve_device(device), 0);
}

c10::Stream stream_from_pool(int priority, c10::DeviceIndex device) {
  device = resolve_device(device);
  priority = std::clamp(priority, kHighestStreamPriority, kLowestStreamPriority);
  const int level = -priority;  // 0 for priority 0, 1 for priority -1
  const uint32_t index = pool(device).next[level]++ % kStreamsPerPool;
  return make_stream(device, 1 + level * kStreamsPerPool +
                                 static_cast<c10::StreamId>(index));
}

void set_current_stream(const c10::Stream& stream) {
  check_stream(stream);
  tls_current[stream.device_index()] = stream.id();
}

int stream_priority(const c10::Stream& stream) {
  check_stream(stream);
  if (stream.id() == 0) {
    return 0;
  }
  return -static_cast<int>((stream.id() - 1) / kStreamsPerPool);
}

runtime::StreamHandle native_stream(const c10::Stream& stream) {
  if (stream.id() == 0) {
    return nullptr;  // the provider's default stream
  }
  check_stream(stream);
  DevicePool& p = pool(stream.device_index());
  const int slot = static_cast<int>(stream.id()) - 1;
  std::call_once(p.once[slot], [&] {
    p.handles[slot] = runtime::provider().stream_create(
        stream.device_index(), stream_priority(stream));
  });
  return p.handles[slot].load();
}

c10::StreamId stream_id_of_handle(c10::DeviceIndex device,
                                  runtime::StreamHandle handle) {
  if (handle == nullptr) {
    return 0;
  }
  if (device < 0 || device >= device_count()) {
    return -1;
  }
  DevicePool& p = pool(device);
  for (int slot = 0; slot < kMaxStreamId; ++slot) {
    if (p.handles[slot].load() == handle) {
      return static_cast<c10::StreamId>(slot + 1);
    }
  }
  return -1;
}

}  // namespace torch_infini
