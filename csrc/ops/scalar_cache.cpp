#include "ops/scalar_cache.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/scalar_tensor.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "core/InfiniGraph.h"
#include "core/InfiniStream.h"
#include "ops/sync_debug.h"
#include "runtime/scalar_conversion.h"

namespace torch_infini::ops {
namespace {

constexpr size_t kMaxCachedScalars = 4096;

// Device, dtype, and the value's bytes (two words: complex128's 16).
using Key = std::tuple<int, int, uint64_t, uint64_t>;

}  // namespace

at::Tensor device_scalar(const at::Scalar& value, at::ScalarType dtype,
                         at::Device device) {
  // `value` as `dtype`, converted as CPU's kernels convert a wrapped number
  // (uint8_tensor + 256 adds 0, float_tensor + 1e39 adds inf: at::
  // scalar_tensor's range check would refuse both), without a trip through
  // the dispatcher where runtime/scalar_conversion.h handles the dtypes (x +
  // 1.5 on every call of a loop).
  const size_t size = c10::elementSize(dtype);
  runtime::ScalarBytes bytes{};
  if (!runtime::convert_number(value, dtype, bytes)) {
    const at::Tensor converted =
        at::scalar_tensor(value, at::TensorOptions().dtype(value.type()))
            .to(dtype);
    std::memcpy(bytes.data(), converted.const_data_ptr(), size);
  }
  const auto [low, high] = runtime::words_of(bytes);
  const Key key{device.index(), static_cast<int>(dtype), low, high};
  static std::mutex mutex;
  // Leaked on purpose: device tensors must not be freed during static
  // destruction, after the runtime may be gone.
  static auto& cache = *std::make_unique<std::map<Key, at::Tensor>>().release();
  {
    std::lock_guard<std::mutex> guard(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) {
      return it->second;
    }
  }
  // The copy (a device call) happens outside the lock.
  const at::Tensor cpu_value = at::empty({}, at::TensorOptions().dtype(dtype));
  std::memcpy(cpu_value.mutable_data_ptr(), bytes.data(), size);
  at::Tensor on_device =
      at::empty({}, at::TensorOptions().dtype(dtype).device(device));
  if (capture_underway() &&
      is_stream_capturing(current_stream(device.index()))) {
    // A copy from pageable memory cannot be captured: a fill kernel, which
    // the graph records (and each replay runs), sets the value instead. Not
    // cached: its value exists only once a replay has run.
    on_device.fill_(cpu_value.item());
    return on_device;
  }
  {
    const OwnSync once_per_value;
    on_device.copy_(cpu_value);
  }
  std::lock_guard<std::mutex> guard(mutex);
  if (cache.size() < kMaxCachedScalars) {
    cache.emplace(key, on_device);
  }
  return on_device;
}

}  // namespace torch_infini::ops
