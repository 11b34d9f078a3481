#pragma once

#include <ATen/core/Tensor.h>

namespace torch_infini::ops {

// A one-element device tensor holding `value` as `dtype` on `device`. Values
// are cached (up to a bound), so `x + 1` in a loop copies the 1 to the device
// once instead of blocking the host on every call.
at::Tensor device_scalar(const at::Scalar& value, at::ScalarType dtype,
                         at::Device device);

}  // namespace torch_infini::ops
