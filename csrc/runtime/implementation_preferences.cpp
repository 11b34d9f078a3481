#include "runtime/implementation_preferences.h"

#include <atomic>
#include <mutex>

namespace torch_infini::runtime {
namespace {

std::mutex& rows_mutex() {
  static std::mutex m;
  return m;
}

std::vector<PreferenceRow>& rows() {
  static std::vector<PreferenceRow> r;
  return r;
}

// Bumped on every change: a thread's copy is stale when it differs.
std::atomic<uint64_t> version{1};

}  // namespace

void set_implementation_preferences(std::vector<PreferenceRow> new_rows) {
  std::lock_guard<std::mutex> guard(rows_mutex());
  rows() = std::move(new_rows);
  version.fetch_add(1, std::memory_order_release);
}

std::vector<PreferenceRow> implementation_preferences() {
  std::lock_guard<std::mutex> guard(rows_mutex());
  return rows();
}

const BackendPreferences& preferences_for(const std::string& backend) {
  thread_local uint64_t seen = 0;
  thread_local std::string seen_backend;
  thread_local BackendPreferences copy;
  const uint64_t now = version.load(std::memory_order_acquire);
  if (now != seen || backend != seen_backend) {
    std::lock_guard<std::mutex> guard(rows_mutex());
    copy = BackendPreferences(rows(), backend);
    seen = version.load(std::memory_order_relaxed);
    seen_backend = backend;
  }
  return copy;
}

}  // namespace torch_infini::runtime
