#pragma once

// The global and thread-local state that PyTorch's kernels, meta functions
// and checks read besides a call's arguments. A cached decision is part of
// the answer it caches: every cache on the call path (layouts, refusals,
// decomposition choices, the InfiniOps binding's tries) keys on this one
// snapshot, built here, so that no cache can forget a part of it. What the
// snapshot holds, and why each part can change an answer:
//   - the default dtype (and so the default complex dtype): the result
//     dtype of int / int, of an integer tensor with a float Python scalar;
//   - grad mode and inference mode: what a kernel may save, and whether an
//     inference tensor may be written;
//   - deterministic algorithms (on, warn only) and filling uninitialized
//     memory: which kernels refuse, and what empty memory holds;
//   - autocast, enabled and its dtype, for CPU, CUDA and infini;
//   - the dispatch-key TLS (included and excluded keys): functionalization,
//     Python and fake modes, _DisableTorchDispatch;
//   - the backend flags kernels read: float32 matmul precision on CUDA
//     (TF32) and on oneDNN, and the calling thread's flush-denormal bits.
// The verification mode (runtime/cache_verification.h) names the parts
// that differ between a cached answer's state and the caller's.

#include <array>
#include <cstdint>
#include <string>

namespace torch_infini::runtime {

struct DispatchState {
  std::array<uint64_t, 4> words{};

  // The calling thread's state now. Costs a few thread-local reads.
  static DispatchState current();

  bool operator==(const DispatchState& other) const {
    return words == other.words;
  }
  bool operator!=(const DispatchState& other) const {
    return !(*this == other);
  }

  // Appends the state's bytes to a cache key.
  void append_to(std::string& key) const {
    key.append(reinterpret_cast<const char*>(words.data()),
               words.size() * sizeof(uint64_t));
  }

  // The parts where `was` (a cached answer's) and this differ, by name and
  // value ("default dtype: Float then Double; grad mode: on then off"), or
  // empty where they agree.
  std::string differences_from(const DispatchState& was) const;
};

}  // namespace torch_infini::runtime
