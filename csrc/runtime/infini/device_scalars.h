#pragma once

// CPU scalar operands on the device: InfiniOps reads device memory only, so a
// CPU 0-dim tensor (a Python scalar, or a CPU scalar beside device tensors,
// as CUDA accepts) is served from a cached one-element device copy, where
// PyTorch's CPU kernel would see exactly that value.

#include <ATen/core/Tensor.h>
#include <c10/core/Allocator.h>

#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include "runtime/infini/infini_common.h"
#include "runtime/scalar_conversion.h"

namespace torch_infini::runtime::infini {

// Whether PyTorch's CPU kernel for an output of `dtype` would read the CPU
// scalar `s` as exactly `s` converted to `dtype` (it reads it in the compute
// type: float32 for float16/bfloat16, so 0.1 * float16 is not 0.1h *).
inline bool scalar_exact(const at::Tensor& s, c10::ScalarType dtype) {
  if (!c10::isFloatingType(dtype)) {
    return !s.is_floating_point() && !s.is_complex();  // integer casts wrap alike
  }
  if (s.is_complex()) {
    return false;
  }
  double value = 0;
  double stored = 0;
  if (!scalar_as_double(s, c10::ScalarType::Double, &value) ||
      !scalar_as_double(s, dtype, &stored)) {
    value = s.item<double>();
    stored = s.to(dtype).item<double>();
  }
  const double compute =
      dtype == c10::ScalarType::Double ? value : static_cast<float>(value);
  return stored == compute || (std::isnan(stored) && std::isnan(compute));
}

// One-element device copies of CPU scalar operands, by device, dtype and
// value bits: a value is copied (and the stream synchronized, so the host
// buffer can go) once, not on every call, as the ops layer does for add.
// Leaked on purpose: device memory must not be freed during static
// destruction, after the runtime may be gone.
class DeviceScalars {
 public:
  // The device memory of `s` as `dtype` (scalar_exact holds). Past the
  // cache's bound the memory is handed to `owner` instead, to free after the
  // launch reading it (the allocator reuses it in stream order).
  void* get(InfiniProvider& provider, int device, StreamHandle stream,
            const at::Tensor& s, c10::ScalarType dtype, c10::DataPtr* owner) {
    const size_t size = c10::elementSize(dtype);
    ScalarBytes value{};
    if (!convert_scalar(s, dtype, value)) {
      const at::Tensor converted = s.to(dtype).contiguous();
      std::memcpy(value.data(), converted.const_data_ptr(), size);
    }
    const auto [low, high] = words_of(value);
    const Key key{device, static_cast<int>(dtype), low, high};
    {
      std::lock_guard<std::mutex> lock(mutex_);  // a lookup, no device call
      const auto it = cache_.find(key);
      if (it != cache_.end()) {
        return it->second.get();
      }
    }
    c10::DataPtr memory =
        c10::GetAllocator(c10::DeviceType::PrivateUse1)->allocate(size);
    provider.memcpy_async(device, memory.get(), value.data(), size,
                          MemcpyKind::kHostToDevice, stream);
    provider.stream_synchronize(device, stream);
    void* data = memory.get();
    std::lock_guard<std::mutex> lock(mutex_);
    if (cache_.size() < kMaxEntries) {
      cache_.emplace(key, std::move(memory));
    } else {
      *owner = std::move(memory);
    }
    return data;
  }

  static DeviceScalars& instance() {
    static auto* scalars = std::make_unique<DeviceScalars>().release();
    return *scalars;
  }

 private:
  // Device, dtype, and the value's bytes (two words: complex128's 16).
  using Key = std::tuple<int, int, uint64_t, uint64_t>;
  static constexpr size_t kMaxEntries = 4096;
  std::mutex mutex_;
  std::map<Key, c10::DataPtr> cache_;
};

}  // namespace torch_infini::runtime::infini
