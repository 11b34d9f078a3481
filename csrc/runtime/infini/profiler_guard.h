#pragma once

// An ATen-backed InfiniOps implementation calls ATen's CPU kernel through
// the dispatcher, on this thread: a profiler has recorded the call it is the
// kernel of, and must not record it twice. The guard is taken only while
// RecordFunction callbacks exist (a profiler, an observer): taking it
// rebuilds the thread's callback cache on entry and exit, about 1,700
// instructions a call, and without callbacks nothing is recorded anyway.

#include <ATen/record_function.h>

#include <optional>

namespace torch_infini::runtime::infini {

class OneCallInProfiles {
 public:
  OneCallInProfiles() {
    if (at::hasCallbacks()) {
      guard_.emplace();
    }
  }

 private:
  std::optional<at::DisableRecordFunctionGuard> guard_;
};

}  // namespace torch_infini::runtime::infini
