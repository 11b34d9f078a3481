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

namespace torch_infini::ops {
namespace {

constexpr size_t kMaxCachedScalars = 4096;

using Key = std::tuple<int, int, uint64_t>;  // device, dtype, value bits

Key key_of(const at::Tensor& cpu_value, at::Device device) {
  uint64_t bits = 0;
  std::memcpy(&bits, cpu_value.const_data_ptr(), cpu_value.element_size());
  return {device.index(), static_cast<int>(cpu_value.scalar_type()), bits};
}

}  // namespace

at::Tensor device_scalar(const at::Scalar& value, at::ScalarType dtype,
                         at::Device device) {
  // An integer into an integer dtype is converted as a tensor is, as CPU's
  // kernels convert a wrapped number: uint8_tensor + 256 adds 0
  // (at::scalar_tensor's range check would refuse). Other values take the
  // one-step path (x + 1.5 on every call of a loop).
  const bool integer_into_integer =
      value.isIntegral(/*includeBool=*/false) &&
      c10::isIntegralType(dtype, /*includeBool=*/false);
  const at::Tensor cpu_value = integer_into_integer
      ? at::scalar_tensor(value, at::TensorOptions().dtype(value.type()))
            .to(dtype)
      : at::scalar_tensor(value, at::TensorOptions().dtype(dtype));
  const Key key = key_of(cpu_value, device);
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
  at::Tensor on_device =
      at::empty({}, at::TensorOptions().dtype(dtype).device(device));
  if (capture_underway() &&
      is_stream_capturing(current_stream(device.index()))) {
    // A copy from pageable memory cannot be captured: a fill kernel, which
    // the graph records (and each replay runs), sets the value instead. Not
    // cached: its value exists only once a replay has run.
    on_device.fill_(value);
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
