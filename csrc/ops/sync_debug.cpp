#include "ops/sync_debug.h"

#include <c10/util/Exception.h>

#include <atomic>

namespace torch_infini::ops {
namespace {

std::atomic<int64_t> mode{0};
thread_local int own_syncs = 0;

}  // namespace

int64_t sync_debug_mode() { return mode.load(std::memory_order_relaxed); }

void set_sync_debug_mode(int64_t value) {
  TORCH_CHECK(value >= 0 && value <= 2, "invalid value of debug_mode, "
              "expected one of 0, 1, 2 (\"default\", \"warn\", \"error\")");
  mode.store(value, std::memory_order_relaxed);
}

void check_sync(const char* what) {
  const int64_t m = sync_debug_mode();
  if (m == 0 || own_syncs > 0) {
    return;
  }
  TORCH_CHECK(m != 2, "called a synchronizing infini operation (", what, ")");
  TORCH_WARN("called a synchronizing infini operation (", what, ")");
}

OwnSync::OwnSync() { ++own_syncs; }

OwnSync::~OwnSync() { --own_syncs; }

}  // namespace torch_infini::ops
