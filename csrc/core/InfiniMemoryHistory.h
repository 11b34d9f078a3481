#pragma once

// The allocator's memory history, in the shape of CUDA's caching allocator's
// (torch.cuda.memory._record_memory_history / _snapshot): what each block
// was allocated by, and a bounded trace of every allocator action, each
// with the Python (and optionally C++) stack that caused it. The snapshot
// (InfiniAllocator.h) turns them into the dictionaries PyTorch's memory
// visualizer (torch.cuda._memory_viz, pytorch.org/memory_viz) draws.

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <utility>
#include <optional>
#include <string>
#include <vector>

namespace torch_infini::allocator {

enum class TraceAction : uint8_t {
  kAlloc,
  kFreeRequested,  // the tensor let go; other streams may still use it
  kFreeCompleted,  // reusable
  kSegmentAlloc,   // memory from the runtime
  kSegmentFree,    // memory back to the runtime
  kOom,
  kSnapshot,
};
constexpr int kTraceActions = 7;

// "alloc", "free_requested", ...: CUDA's names, which the visualizer reads.
const char* action_name(TraceAction action);

using Context = std::shared_ptr<c10::GatheredContext>;

struct TraceEntry {
  TraceAction action;
  uint64_t addr;  // for kOom: the device's free bytes (CUDA's device_free)
  size_t size;
  c10::StreamId stream;
  int64_t time_us;
  Context context;
};

// What _record_memory_history asked for.
struct HistorySettings {
  bool context_state = false;  // keep the allocating stack of live blocks
  bool trace = false;          // keep a trace of actions ("all")
  bool context_alloc = false;  // stacks on alloc entries
  bool context_free = false;   // stacks on free entries
  bool cpp = false;            // C++ frames too (stacks="all")
  size_t max_entries = SIZE_MAX;
  uint32_t skipped = 0;        // bit per TraceAction
};

// Parses _record_memory_history's arguments (CUDA's names and values),
// raising for one it does not know.
HistorySettings parse_history_settings(
    const std::optional<std::string>& enabled,
    const std::optional<std::string>& context, const std::string& stacks,
    size_t max_entries, const std::vector<std::string>& skip_actions);

// Whether anything is recorded: one relaxed load on the allocation path.
bool history_on();
HistorySettings history_settings();
void set_history_settings(const HistorySettings& settings);

// The calling thread's stack where `wanted`, else nullptr.
Context gather_context(bool wanted, bool cpp);

// A device's trace: the last max_entries actions.
class TraceRing {
 public:
  void push(TraceEntry entry, size_t max_entries);
  // Oldest first.
  std::vector<TraceEntry> entries() const;
  void clear();

 private:
  std::vector<TraceEntry> entries_;
  size_t next_ = 0;  // where the next entry goes once full
};

int64_t now_us();

// The allocator's state for torch.infini.memory._snapshot (implemented by
// InfiniAllocator.cpp, which owns the blocks).
struct BlockSnapshot {
  uint64_t address;
  size_t size;
  size_t requested_size;
  const char* state;  // "active_allocated", "active_pending_free", "inactive"
  Context context;    // the allocating stack, while recorded
};

struct SegmentSnapshot {
  c10::DeviceIndex device = 0;
  uint64_t address = 0;
  size_t total_size = 0;
  size_t allocated_size = 0;
  size_t active_size = 0;
  size_t requested_size = 0;
  c10::StreamId stream = 0;
  bool is_small = false;
  std::pair<uint64_t, uint64_t> pool{0, 0};  // graph pool id, (0, 0) if none
  Context context;                            // the segment's first allocation
  std::vector<BlockSnapshot> blocks;
};

struct MemorySnapshot {
  std::vector<SegmentSnapshot> segments;
  std::vector<std::vector<TraceEntry>> device_traces;  // per device
};

MemorySnapshot snapshot();

// Starts, changes or stops (settings all off) the recording; stopping, or
// `clear_history`, empties the traces.
void record_memory_history(const HistorySettings& settings,
                           bool clear_history);

}  // namespace torch_infini::allocator
