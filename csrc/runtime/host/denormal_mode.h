#pragma once

// The calling thread's denormal handling (x86's FTZ and DAZ bits of MXCSR),
// which torch.set_flush_denormal sets for the thread that calls it only: a
// task queued on a stream carries its submitter's, and whoever runs it (the
// stream's worker, or a caller waiting for it) runs it so, as CPU eager
// would have run it on the submitting thread.

#include <cstdint>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

namespace torch_infini::runtime::host {

#if defined(__x86_64__) || defined(_M_X64)
constexpr uint32_t kDenormalBits = 0x8040;  // FTZ (bit 15) and DAZ (bit 6)

inline uint32_t denormal_mode() { return _mm_getcsr() & kDenormalBits; }

// Sets the thread's denormal mode for a scope, where it differs.
class DenormalModeGuard {
 public:
  explicit DenormalModeGuard(uint32_t mode) : saved_(_mm_getcsr()) {
    if ((saved_ & kDenormalBits) != mode) {
      _mm_setcsr((saved_ & ~kDenormalBits) | mode);
      changed_ = true;
    }
  }
  ~DenormalModeGuard() {
    if (changed_) {
      _mm_setcsr(saved_);
    }
  }
  DenormalModeGuard(const DenormalModeGuard&) = delete;
  DenormalModeGuard& operator=(const DenormalModeGuard&) = delete;

 private:
  const uint32_t saved_;
  bool changed_ = false;
};
#else
inline uint32_t denormal_mode() { return 0; }
struct DenormalModeGuard {
  explicit DenormalModeGuard(uint32_t) {}
};
#endif

}  // namespace torch_infini::runtime::host
