#include "core/InfiniMemoryHistory.h"

#include <c10/util/Exception.h>
#include <torch/csrc/profiler/combined_traceback.h>

#include <chrono>
#include <mutex>

namespace torch_infini::allocator {
namespace {

std::atomic<bool> on{false};
std::mutex settings_mutex;
HistorySettings current;  // guarded by settings_mutex

}  // namespace

const char* action_name(TraceAction action) {
  switch (action) {
    case TraceAction::kAlloc:
      return "alloc";
    case TraceAction::kFreeRequested:
      return "free_requested";
    case TraceAction::kFreeCompleted:
      return "free_completed";
    case TraceAction::kSegmentAlloc:
      return "segment_alloc";
    case TraceAction::kSegmentFree:
      return "segment_free";
    case TraceAction::kOom:
      return "oom";
    case TraceAction::kSnapshot:
      return "snapshot";
  }
  return "unknown";
}

HistorySettings parse_history_settings(
    const std::optional<std::string>& enabled,
    const std::optional<std::string>& context, const std::string& stacks,
    size_t max_entries, const std::vector<std::string>& skip_actions) {
  HistorySettings s;
  TORCH_CHECK(!enabled || *enabled == "state" || *enabled == "all",
              "_record_memory_history: enabled must be None, 'state' or "
              "'all', not '", *enabled, "'");
  TORCH_CHECK(!context || *context == "state" || *context == "alloc" ||
                  *context == "all",
              "_record_memory_history: context must be None, 'state', "
              "'alloc' or 'all', not '", *context, "'");
  TORCH_CHECK(stacks == "python" || stacks == "all",
              "_record_memory_history: stacks must be 'python' or 'all', not '",
              stacks, "'");
  if (!enabled) {
    return s;  // off
  }
  s.trace = *enabled == "all";
  s.context_state = context.has_value();
  s.context_alloc = context && (*context == "alloc" || *context == "all");
  s.context_free = context && *context == "all";
  s.cpp = stacks == "all";
  s.max_entries = max_entries;
  for (const std::string& name : skip_actions) {
    bool known = false;
    for (int a = 0; a < kTraceActions; ++a) {
      if (name == action_name(static_cast<TraceAction>(a))) {
        s.skipped |= 1u << a;
        known = true;
      }
    }
    TORCH_CHECK(known, "_record_memory_history: unknown action '", name,
                "' in skip_actions");
  }
  return s;
}

bool history_on() {
  return on.load(std::memory_order_relaxed);
}

HistorySettings history_settings() {
  std::lock_guard<std::mutex> guard(settings_mutex);
  return current;
}

void set_history_settings(const HistorySettings& settings) {
  std::lock_guard<std::mutex> guard(settings_mutex);
  current = settings;
  on.store(settings.context_state || settings.trace);
}

Context gather_context(bool wanted, bool cpp) {
  if (!wanted) {
    return nullptr;
  }
  return torch::CapturedTraceback::gather(/*python=*/true, /*script=*/true,
                                          cpp);
}

void TraceRing::push(TraceEntry entry, size_t max_entries) {
  if (max_entries == 0) {
    return;
  }
  if (entries_.size() < max_entries) {
    entries_.push_back(std::move(entry));
    return;
  }
  // Full: the oldest entry is overwritten (CUDA's ring buffer).
  next_ %= entries_.size();
  entries_[next_++] = std::move(entry);
}

std::vector<TraceEntry> TraceRing::entries() const {
  std::vector<TraceEntry> ordered;
  ordered.reserve(entries_.size());
  const size_t start = entries_.empty() ? 0 : next_ % entries_.size();
  for (size_t i = 0; i < entries_.size(); ++i) {
    ordered.push_back(entries_[(start + i) % entries_.size()]);
  }
  return ordered;
}

void TraceRing::clear() {
  entries_.clear();
  next_ = 0;
}

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace torch_infini::allocator
