#pragma once

// Which InfiniOps implementation serves a call. Pure (no InfiniOps, no
// PyTorch), so CI tests it against a stub install (tests/test_infiniops_binding.py).
//
// InfiniOps' Operator<Op, device type, index> exists for the indices its
// build compiled (read from libinfiniops' symbols at build time). Asking
// Make for any other index aborts the process, so only listed ones are ever
// chosen: the native implementation for the device (the lowest native
// index) and the ATen-backed one (index 8, InfiniOps built WITH_TORCH=ON),
// the faster first where it is measured (runtime/implementation_
// preferences.h: on InfiniRT's CPU backend, ATen-backed), else native
// first; the other where the first is absent or the call is beyond its
// limits.

#include <vector>

#include "runtime/implementation_preferences.h"

namespace torch_infini::runtime::infini {

// An implementation InfiniOps' library has: Operator<Op, device_type, index>.
struct Implementation {
  int device_type;  // InfiniRT Device::Type
  int index;
};

constexpr int kAtenBackedIndex = 8;

// The lowest native (not ATen-backed) index for `device_type`, or -1.
inline int native_index(const std::vector<Implementation>& impls,
                        int device_type) {
  int best = -1;
  for (const auto& i : impls) {
    if (i.device_type == device_type && i.index != kAtenBackedIndex &&
        (best < 0 || i.index < best)) {
      best = i.index;
    }
  }
  return best;
}

inline bool has_implementation_index(const std::vector<Implementation>& impls,
                                     int device_type, int index) {
  for (const auto& i : impls) {
    if (i.device_type == device_type && i.index == index) {
      return true;
    }
  }
  return false;
}

// The index to run a call with, or -1 for none. `native_fits` says whether
// the call is within the native implementation's limits (asked only where
// one exists and `native_allowed`); `aten_fits` the same of the ATen-backed
// one. `faster` (measured, see above) says which is tried first; an
// implementation is asked whether it fits only when tried.
template <typename NativeFits, typename AtenFits>
int choose_implementation(const std::vector<Implementation>& impls,
                          int device_type, bool native_allowed,
                          ImplementationKind faster, NativeFits native_fits,
                          AtenFits aten_fits) {
  const int native = native_index(impls, device_type);
  const auto try_native = [&] {
    return native >= 0 && native_allowed && native_fits();
  };
  const auto try_aten = [&] {
    return has_implementation_index(impls, device_type, kAtenBackedIndex) &&
        aten_fits();
  };
  if (faster == ImplementationKind::kAtenBacked) {
    return try_aten() ? kAtenBackedIndex : try_native() ? native : -1;
  }
  return try_native() ? native : try_aten() ? kAtenBackedIndex : -1;
}

}  // namespace torch_infini::runtime::infini
