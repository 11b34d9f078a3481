#pragma once

// How a provider served the last OpKernels::aten call on the calling thread,
// for the coverage report: on its library's native kernel, or on an
// ATen-backed implementation of it (InfiniOps built WITH_TORCH=ON).

#include <cstdint>

namespace torch_infini::runtime {

enum class AtenRoute : uint8_t { kNative, kAtenBacked };

inline AtenRoute& last_aten_route() {
  thread_local AtenRoute route = AtenRoute::kNative;
  return route;
}

}  // namespace torch_infini::runtime
