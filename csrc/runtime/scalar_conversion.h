#pragma once

// Scalars converted as CPU's kernels convert a wrapped number
// (c10::convert, which CPU's copy kernel uses: float_tensor + 1e39 adds
// inf, uint8_tensor + 256 adds 0), read and written directly: the calls
// that take a Python number do this on every call, where a conversion
// through ATen (s.to(dtype), at::scalar_tensor) cost trips through the
// dispatcher, and at::scalar_tensor refuses values out of the dtype's range.

#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <utility>

namespace torch_infini::runtime {

// Up to 16 bytes: a scalar of any dtype, complex128 too. Zero-initialized
// where written, so the bytes past a dtype's size are zeros.
using ScalarBytes = std::array<unsigned char, 16>;

// The bytes as two words: a cache key's, equal exactly where the values'
// bytes are (the rest zeros).
inline std::pair<uint64_t, uint64_t> words_of(const ScalarBytes& bytes) {
  std::pair<uint64_t, uint64_t> words;
  std::memcpy(&words.first, bytes.data(), sizeof(uint64_t));
  std::memcpy(&words.second, bytes.data() + sizeof(uint64_t), sizeof(uint64_t));
  return words;
}

// The bytes of the one-element CPU tensor `s` converted to `dtype` as
// s.to(dtype) converts it. False where `s` or `dtype` is not a real dtype
// (bool, integers, float16, bfloat16, float32, float64) or `s` is not a
// plain one-element tensor: the caller converts through ATen then.
bool convert_scalar(const at::Tensor& s, c10::ScalarType dtype,
                    ScalarBytes& out);

// The bytes of `value` (of its own type: a double, an int64 or a bool)
// converted to `dtype` as a wrapped number of it is; false as
// convert_scalar is.
bool convert_number(const c10::Scalar& value, c10::ScalarType dtype,
                    ScalarBytes& out);

// The CPU scalar `s` converted to `dtype`, then read as a double, as
// s.to(dtype).item<double>() reads it; false where convert_scalar is.
bool scalar_as_double(const at::Tensor& s, c10::ScalarType dtype,
                      double* out);

}  // namespace torch_infini::runtime
