// Scalars converted as CPU's kernels convert them
// (runtime/scalar_conversion.h).

#include "runtime/scalar_conversion.h"

#include <c10/util/TypeCast.h>

#include <cstring>

namespace torch_infini::runtime {
namespace {

// Calls `f` with a value of the C++ type of `type`, for the real dtypes;
// false for any other.
template <typename F>
bool with_real_type(c10::ScalarType type, F&& f) {
  switch (type) {
#define TORCH_INFINI_REAL_CASE(ctype, name) \
  case c10::ScalarType::name:               \
    f(ctype{});                             \
    return true;
    AT_FORALL_SCALAR_TYPES_AND3(Bool, Half, BFloat16, TORCH_INFINI_REAL_CASE)
#undef TORCH_INFINI_REAL_CASE
    default:
      return false;
  }
}

// `value` converted to `dtype`, into `out`; false for a dtype not handled.
template <typename From>
bool write_as(From value, c10::ScalarType dtype, ScalarBytes& out) {
  return with_real_type(dtype, [&](auto target) {
    using To = decltype(target);
    const To result = c10::convert<To>(value);
    static_assert(sizeof(To) <= sizeof(ScalarBytes));
    std::memcpy(out.data(), &result, sizeof(To));
  });
}

}  // namespace

bool convert_scalar(const at::Tensor& s, c10::ScalarType dtype,
                    ScalarBytes& out) {
  if (!s.defined() || s.dim() != 0 || s.layout() != c10::kStrided ||
      s.is_conj() || s.is_neg() || s._is_zerotensor() ||
      s.const_data_ptr() == nullptr) {
    return false;
  }
  bool converted = false;
  with_real_type(s.scalar_type(), [&](auto source) {
    using From = decltype(source);
    converted =
        write_as(*static_cast<const From*>(s.const_data_ptr()), dtype, out);
  });
  return converted;
}

bool convert_number(const c10::Scalar& value, c10::ScalarType dtype,
                    ScalarBytes& out) {
  switch (value.type()) {
    case c10::ScalarType::Double:
      return write_as(value.toDouble(), dtype, out);
    case c10::ScalarType::Long:
      return write_as(value.toLong(), dtype, out);
    case c10::ScalarType::Bool:
      return write_as(value.toBool(), dtype, out);
    default:  // complex, unsigned 64-bit, symbolic
      return false;
  }
}

bool scalar_as_double(const at::Tensor& s, c10::ScalarType dtype,
                      double* out) {
  ScalarBytes converted{};
  if (!convert_scalar(s, dtype, converted)) {
    return false;
  }
  return with_real_type(dtype, [&](auto target) {
    using To = decltype(target);
    To value;
    std::memcpy(&value, converted.data(), sizeof(To));
    *out = c10::convert<double>(value);
  });
}

}  // namespace torch_infini::runtime
