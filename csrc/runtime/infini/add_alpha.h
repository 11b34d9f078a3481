#pragma once

// InfiniOps' native Add computes a + alpha * b with two roundings (alpha * b,
// then the sum) where ATen's add kernel rounds once. With alpha 1 or -1 the
// product is exact, and for integer types there is no rounding: only then
// does the native Add compute what ATen computes.

#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>

namespace torch_infini::runtime::infini {

inline bool add_alpha_is_exact(const c10::Scalar& alpha, c10::ScalarType out) {
  if (!c10::isFloatingType(out)) {
    return true;
  }
  const double a = alpha.toDouble();
  return a == 1.0 || a == -1.0;
}

}  // namespace torch_infini::runtime::infini
