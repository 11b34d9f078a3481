#include "core/InfiniAllocator.h"

#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <algorithm>
#include <cstdio>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <unordered_map>
#include <vector>

#include "core/InfiniFunctions.h"
#include "core/InfiniMemoryHistory.h"
#include "core/InfiniStream.h"
#include "runtime/env.h"
#include "runtime/runtime.h"

namespace torch_infini::allocator {
namespace {

using c10::CachingAllocator::Stat;
using c10::CachingAllocator::StatArray;
using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kMinBlockSize = 512;
constexpr size_t kSmallSize = size_t{1} << 20;
constexpr size_t kSmallBuffer = size_t{2} << 20;
constexpr size_t kLargeBuffer = size_t{20} << 20;
constexpr size_t kMinLargeAlloc = size_t{10} << 20;
constexpr size_t kRoundLarge = size_t{2} << 20;

struct Block;
struct PrivatePool;

// What a pool orders its free blocks by: stream, then size, then address.
// An allocation looks a block up by {stream, size} alone (the lowest
// address), so the search key is this, not a whole Block built per call.
struct BlockKey {
  c10::StreamId stream;
  size_t size;
  const char* ptr;
};

struct BlockOrder {
  using is_transparent = void;  // lookups by BlockKey
  static BlockKey key(const Block* block);
  static const BlockKey& key(const BlockKey& key) { return key; }
  template <typename A, typename B>
  bool operator()(const A& a, const B& b) const {
    const BlockKey& x = key(a);
    const BlockKey& y = key(b);
    if (x.stream != y.stream) {
      return x.stream < y.stream;
    }
    if (x.size != y.size) {
      return x.size < y.size;
    }
    return std::less<const char*>()(x.ptr, y.ptr);
  }
};

using FreeBlocks = std::set<Block*, BlockOrder>;

struct BlockPool {
  explicit BlockPool(bool small, PrivatePool* owner_pool = nullptr)
      : is_small(small), owner(owner_pool) {}
  FreeBlocks blocks;
  const bool is_small;
  PrivatePool* const owner;  // the graph-private pool it belongs to, if any
};

// A graph-private pool (CUDA's graph memory pools): what captures allocate,
// kept for their graphs' replays. Its blocks are reused only by allocations
// into the same pool (later in the capture, or by a graph sharing it), and
// its segments go back to the runtime only once no graph uses it.
struct PrivatePool {
  PrivatePool() : small(true, this), large(false, this) {}
  BlockPool small;
  BlockPool large;
  int use_count = 1;  // graphs captured into it and not yet reset
  int segments = 0;
  // Streams whose queued work may use its memory: the capture streams and
  // every stream a graph was replayed on.
  c10::SmallVector<c10::StreamId, 2> streams;
};

struct Block {
  c10::DeviceIndex device = 0;
  c10::StreamId stream = 0;  // the stream that allocated it
  size_t size = 0;
  size_t requested = 0;
  BlockPool* pool = nullptr;
  char* ptr = nullptr;
  bool allocated = false;
  int pending_events = 0;
  Block* prev = nullptr;  // neighbours inside the same segment
  Block* next = nullptr;
  c10::SmallVector<c10::Stream, 2> stream_uses;  // from record_stream
  // Memory history (InfiniMemoryHistory.h), only while it records: the
  // stack that allocated the block, and for a segment's first block the
  // stack that made the segment.
  Context context;
  Context segment_context;
};

// What the memory history wants of one allocation or free, read once for
// it: whether it records, and the caller's stack where it keeps one.
struct CallHistory {
  bool on = false;
  Context context;
};

inline BlockKey BlockOrder::key(const Block* block) {
  return {block->stream, block->size, block->ptr};
}

size_t round_size(size_t size) {
  return size < kMinBlockSize
      ? kMinBlockSize
      : kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

size_t segment_size(size_t size) {
  if (size <= kSmallSize) {
    return kSmallBuffer;
  }
  if (size < kMinLargeAlloc) {
    return kLargeBuffer;
  }
  return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
}

bool parse_caching_enabled() {
  // "key:value[,key:value]"; today the only key is `caching`.
  const std::string conf = runtime::env_string("TORCH_INFINI_ALLOC_CONF", "");
  bool enabled = true;
  size_t start = 0;
  while (start < conf.size()) {
    size_t end = conf.find(',', start);
    if (end == std::string::npos) {
      end = conf.size();
    }
    const std::string item = conf.substr(start, end - start);
    const size_t colon = item.find(':');
    // The only key today is `caching`, a switch like every other one.
    if (colon == std::string::npos || item.substr(0, colon) != "caching" ||
        !runtime::parse_switch(item.substr(colon + 1), &enabled)) {
      runtime::env_invalid("TORCH_INFINI_ALLOC_CONF", conf,
                           "comma-separated key:value options; the only key "
                           "is caching, with 1 (on, the default) or 0 (off)");
    }
    start = end + 1;
  }
  return enabled;
}

// A figure of CUDA's stats moves in the aggregate and in the block's pool
// together. Inline and without a sign test: this runs 10 times per
// allocation and free.
constexpr size_t kAggregate = static_cast<size_t>(StatType::AGGREGATE);

inline Stat& pool_stat(StatArray& array, bool small) {
  return array[static_cast<size_t>(small ? StatType::SMALL_POOL
                                         : StatType::LARGE_POOL)];
}

inline void stat_increase(StatArray& array, bool small, size_t amount) {
  array[kAggregate].increase(amount);
  pool_stat(array, small).increase(amount);
}

inline void stat_decrease(StatArray& array, bool small, size_t amount) {
  array[kAggregate].decrease(amount);
  pool_stat(array, small).decrease(amount);
}

// One device's allocator state. The mutex guards the pools and stats; it is
// per device (no process-wide lock), and the runtime calls made under it are
// the short, non-blocking ones (malloc, event record/query).
class DeviceCache {
 public:
  explicit DeviceCache(c10::DeviceIndex device, bool caching)
      : device_(device), caching_(caching) {}

  Block* malloc(size_t requested, c10::StreamId stream,
                const CallHistory& history) {
    const Context& context = history.context;
    std::unique_lock<std::mutex> lock(mutex_);
    process_events();
    const size_t size = caching_ ? round_size(requested) : requested;
    BlockPool& pool = pool_for(stream, size);
    Block* block = caching_ ? take_free_block(pool, stream, size) : nullptr;
    if (block == nullptr) {
      const size_t bytes =
          caching_ ? segment_size(size) : std::max<size_t>(size, 1);
      void* ptr = try_runtime_malloc(bytes);
      if (ptr == nullptr) {
        // Free what the cache holds and try once more, as CUDA's allocator
        // does. Another thread may have freed a fitting block meanwhile.
        ++stats_.num_alloc_retries;
        if (capturing_.empty()) {  // nothing may wait for a stream now
          release_cached(lock);
        }
        block = caching_ ? take_free_block(pool, stream, size) : nullptr;
        if (block == nullptr) {
          ptr = try_runtime_malloc(bytes);
        }
      }
      if (block == nullptr) {
        if (ptr == nullptr) {
          raise_out_of_memory(requested, stream, context);
        }
        block = new_segment(pool, stream, ptr, bytes);
        if (history.on) {
          note(TraceAction::kSegmentAlloc, block->ptr, bytes, stream, context);
        }
        block->segment_context = context;
      }
    }
    if (caching_ && should_split(*block, size)) {
      split(block, size);
    }
    block->allocated = true;
    block->requested = requested;
    stat_increase(stats_.allocation, pool.is_small, 1);
    stat_increase(stats_.allocated_bytes, pool.is_small, block->size);
    stat_increase(stats_.active, pool.is_small, 1);
    stat_increase(stats_.active_bytes, pool.is_small, block->size);
    stat_increase(stats_.requested_bytes, pool.is_small, requested);
    if (history.on) {
      block->context = context;
      note(TraceAction::kAlloc, block->ptr, block->size, stream, context);
    }
    return block;
  }

  void free(Block* block, const CallHistory& history) {
    std::lock_guard<std::mutex> guard(mutex_);
    const bool small = block->pool->is_small;
    block->allocated = false;
    if (history.on) {
      note(TraceAction::kFreeRequested, block->ptr, block->size, block->stream,
           history.context);
    }
    stat_decrease(stats_.allocation, small, 1);
    stat_decrease(stats_.allocated_bytes, small, block->size);
    stat_decrease(stats_.requested_bytes, small, block->requested);
    if (!caching_) {
      // The segment goes back to the runtime, so its own stream must be done
      // with it as well.
      block->stream_uses.push_back(stream_of(block->stream));
    }
    if (!block->stream_uses.empty()) {
      if (!capturing_.empty()) {
        // The events would be recorded into a capture: wait for its end.
        deferred_.push_back(block);
        return;
      }
      record_free_events(block);
      process_events();
      return;
    }
    release_block(block, history.on);
  }

  // Allocations on streams `capturing` accepts (those capturing into the
  // pool) come from private pool `id` until end_allocate_to_pool.
  void begin_allocate_to_pool(c10::MempoolId_t id,
                              std::function<bool(c10::StreamId)> capturing) {
    std::lock_guard<std::mutex> guard(mutex_);
    TORCH_CHECK(caching_, "graph capture needs the caching allocator; unset "
                "TORCH_INFINI_ALLOC_CONF=caching:0");
    auto& pool = private_pools_[id];
    if (pool == nullptr) {
      pool = std::make_unique<PrivatePool>();
    } else {
      ++pool->use_count;  // a graph sharing another's pool
    }
    capturing_.emplace_back(id, std::move(capturing));
  }

  void end_allocate_to_pool(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto it = capturing_.begin(); it != capturing_.end(); ++it) {
      if (it->first == id) {
        capturing_.erase(it);
        break;
      }
    }
    if (capturing_.empty()) {
      for (Block* block : deferred_) {
        record_free_events(block);
      }
      deferred_.clear();
      process_events();
    }
  }

  // A graph using pool `id` is gone: once none is, empty_cache returns the
  // pool's free segments to the runtime.
  void release_pool(c10::MempoolId_t id) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = private_pools_.find(id);
    if (it != private_pools_.end() && it->second->use_count > 0) {
      --it->second->use_count;
    }
  }

  // Work on `stream` may use pool `id`'s memory (a replay).
  void note_pool_stream(c10::MempoolId_t id, c10::StreamId stream) {
    std::lock_guard<std::mutex> guard(mutex_);
    auto it = private_pools_.find(id);
    if (it == private_pools_.end()) {
      return;
    }
    auto& streams = it->second->streams;
    if (std::find(streams.begin(), streams.end(), stream) == streams.end()) {
      streams.push_back(stream);
    }
  }

  void record_stream(Block* block, c10::Stream stream) {
    std::lock_guard<std::mutex> guard(mutex_);
    if (stream.id() == block->stream) {
      return;  // its own stream already orders reuse
    }
    for (const c10::Stream& s : block->stream_uses) {
      if (s == stream) {
        return;
      }
    }
    block->stream_uses.push_back(stream);
  }

  // Whether `p` lies in a segment of this device (getDeviceFromPtr). Only
  // segments are indexed: allocation and free stay free of map updates.
  bool contains(const void* p) {
    std::lock_guard<std::mutex> guard(mutex_);
    char* c = static_cast<char*>(const_cast<void*>(p));
    auto it = segments_.upper_bound(c);
    if (it == segments_.begin()) {
      return false;
    }
    --it;
    return c < it->first + it->second.bytes;
  }

  void empty_cache() {
    std::unique_lock<std::mutex> lock(mutex_);
    process_events();
    if (!capturing_.empty()) {
      return;  // waiting for a stream would wait for captured work
    }
    release_cached(lock);
  }

  DeviceStats stats() {
    std::lock_guard<std::mutex> guard(mutex_);
    // Frees whose streams have finished count as freed now, not at the next
    // allocation (event queries never block).
    process_events();
    return stats_;
  }

  void reset_peak() {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto* array : stat_arrays()) {
      for (Stat& s : *array) {
        s.reset_peak();
      }
    }
  }

  void reset_accumulated() {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto* array : stat_arrays()) {
      for (Stat& s : *array) {
        s.reset_accumulated();
      }
    }
    stats_.num_alloc_retries = 0;
    stats_.num_ooms = 0;
    stats_.num_device_alloc = 0;
    stats_.num_device_free = 0;
  }

  void set_limit(size_t limit) {
    std::lock_guard<std::mutex> guard(mutex_);
    limit_ = limit;
  }

  // The segments and their blocks as they are now, and the trace so far.
  void snapshot(MemorySnapshot& out) {
    std::lock_guard<std::mutex> guard(mutex_);
    std::map<const PrivatePool*, c10::MempoolId_t> pool_ids;
    for (const auto& [id, pool] : private_pools_) {
      pool_ids.emplace(pool.get(), id);
    }
    for (const auto& [base, segment] : segments_) {
      const Block* head = segment.head;
      SegmentSnapshot seg;
      seg.device = device_;
      seg.address = reinterpret_cast<uintptr_t>(base);
      seg.total_size = segment.bytes;
      seg.stream = head->stream;
      seg.is_small = head->pool->is_small;
      seg.pool = head->pool->owner != nullptr ? pool_ids.at(head->pool->owner)
                                              : c10::MempoolId_t{0, 0};
      seg.context = head->segment_context;
      for (const Block* b = head; b != nullptr; b = b->next) {
        // A free block waiting for other streams is in no pool yet.
        const bool cached = !b->allocated &&
            b->pool->blocks.count(const_cast<Block*>(b)) > 0;
        const char* state = b->allocated ? "active_allocated"
                            : cached     ? "inactive"
                                         : "active_pending_free";
        const size_t requested = cached ? b->size : b->requested;
        seg.blocks.push_back({reinterpret_cast<uintptr_t>(b->ptr), b->size,
                              requested, state, b->context});
        seg.allocated_size += b->allocated ? b->size : 0;
        seg.active_size += cached ? 0 : b->size;
        seg.requested_size += b->allocated ? b->requested : 0;
      }
      out.segments.push_back(std::move(seg));
    }
    if (history_on()) {
      note(TraceAction::kSnapshot, uint64_t{0}, 0, 0, nullptr);
    }
    out.device_traces.at(device_) = trace_.entries();
  }

  void clear_trace() {
    std::lock_guard<std::mutex> guard(mutex_);
    trace_.clear();
  }

 private:
  std::vector<StatArray*> stat_arrays() {
    return {&stats_.allocation, &stats_.segment, &stats_.active,
            &stats_.inactive_split, &stats_.allocated_bytes,
            &stats_.reserved_bytes, &stats_.active_bytes,
            &stats_.inactive_split_bytes, &stats_.requested_bytes};
  }

  // The pool an allocation of `size` on `stream` comes from: a private pool
  // when the stream is capturing into one.
  BlockPool& pool_for(c10::StreamId stream, size_t size) {
    for (const auto& [id, capturing] : capturing_) {
      if (capturing(stream)) {
        PrivatePool& pool = *private_pools_.at(id);
        if (std::find(pool.streams.begin(), pool.streams.end(), stream) ==
            pool.streams.end()) {
          pool.streams.push_back(stream);
        }
        return size <= kSmallSize ? pool.small : pool.large;
      }
    }
    return size <= kSmallSize ? small_ : large_;
  }

  void record_free_events(Block* block) {
    for (const c10::Stream& s : block->stream_uses) {
      runtime::EventHandle ev = take_event();
      runtime::provider().event_record(device_, ev, native_stream(s));
      pending_.emplace_back(ev, block);
      ++block->pending_events;
    }
    block->stream_uses.clear();
  }

  Block* take_free_block(BlockPool& pool, c10::StreamId stream, size_t size) {
    // The smallest fitting block of the stream, at its lowest address.
    auto it = pool.blocks.lower_bound(BlockKey{stream, size, nullptr});
    if (it == pool.blocks.end() || (*it)->stream != stream) {
      return nullptr;
    }
    Block* block = *it;
    keep_node(pool.blocks.extract(it));
    if (block->prev != nullptr || block->next != nullptr) {
      stat_decrease(stats_.inactive_split, pool.is_small, 1);
      stat_decrease(stats_.inactive_split_bytes, pool.is_small, block->size);
    }
    return block;
  }

  [[noreturn]] void raise_out_of_memory(size_t requested,
                                        c10::StreamId stream,
                                        const Context& context) {
    ++stats_.num_ooms;
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    runtime::provider().mem_get_info(device_, &free_bytes, &total_bytes);
    if (history_on()) {
      note(TraceAction::kOom, free_bytes, requested, stream, context);
    }
    TORCH_CHECK_WITH(
        OutOfMemoryError, false, "infini out of memory. Tried to allocate ",
        format_bytes(requested), " on infini:", static_cast<int>(device_),
        ". Device has ", format_bytes(total_bytes), " total, ",
        format_bytes(free_bytes), " free; ",
        format_bytes(stats_.allocated_bytes[kAggregate].current),
        " allocated by PyTorch, ",
        format_bytes(stats_.reserved_bytes[kAggregate].current),
        " reserved in total by PyTorch",
        limit_ != std::numeric_limits<size_t>::max()
            ? " (capped by set_per_process_memory_fraction at " +
                format_bytes(limit_) + ")"
            : std::string(),
        ". Free tensors, call torch.infini.empty_cache(), or use smaller "
        "batches.");
  }

  Block* new_segment(BlockPool& pool, c10::StreamId stream, void* ptr,
                     size_t bytes) {
    Block* block = make_block().release();  // owned by the pools from here on
    block->device = device_;
    block->stream = stream;
    block->size = bytes;
    block->pool = &pool;
    block->ptr = static_cast<char*>(ptr);
    segments_.emplace(block->ptr, Segment{bytes, block});
    if (pool.owner != nullptr) {
      ++pool.owner->segments;
    }
    ++stats_.num_device_alloc;
    stat_increase(stats_.segment, pool.is_small, 1);
    stat_increase(stats_.reserved_bytes, pool.is_small, bytes);
    return block;
  }

  void* try_runtime_malloc(size_t bytes) {
    const size_t reserved =
        static_cast<size_t>(stats_.reserved_bytes[kAggregate].current);
    if (limit_ != std::numeric_limits<size_t>::max() &&
        reserved + bytes > limit_) {
      return nullptr;
    }
    return runtime::provider().malloc(device_, bytes);
  }

  static bool should_split(const Block& block, size_t size) {
    const size_t remaining = block.size - size;
    return block.pool->is_small ? remaining >= kMinBlockSize
                                : remaining > kSmallSize;
  }

  void split(Block* block, size_t size) {
    Block* rest = make_block().release();
    rest->device = device_;
    rest->stream = block->stream;
    rest->pool = block->pool;
    rest->ptr = block->ptr + size;
    rest->size = block->size - size;
    rest->prev = block;
    rest->next = block->next;
    if (rest->next != nullptr) {
      rest->next->prev = rest;
    }
    block->next = rest;
    block->size = size;
    insert_free(*rest->pool, rest);
    stat_increase(stats_.inactive_split, rest->pool->is_small, 1);
    stat_increase(stats_.inactive_split_bytes, rest->pool->is_small,
                  rest->size);
  }

  // A block no stream uses any more goes back to its pool (or, without
  // caching, to the runtime), merged with free neighbours. `history`: what
  // history_on() said for this free.
  void release_block(Block* block, bool history) {
    const bool small = block->pool->is_small;
    if (history) {
      note(TraceAction::kFreeCompleted, block->ptr, block->size, block->stream,
           nullptr);
      block->context.reset();
    }
    stat_decrease(stats_.active, small, 1);
    stat_decrease(stats_.active_bytes, small, block->size);
    if (!caching_) {
      free_segment(block);
      return;
    }
    for (Block* neighbour : {block->prev, block->next}) {
      if (neighbour == nullptr || neighbour->allocated ||
          neighbour->pending_events > 0) {
        continue;
      }
      keep_node(block->pool->blocks.extract(neighbour));
      stat_decrease(stats_.inactive_split, small, 1);
      stat_decrease(stats_.inactive_split_bytes, small, neighbour->size);
      if (neighbour == block->prev) {
        block->ptr = neighbour->ptr;
        block->prev = neighbour->prev;
        if (block->prev != nullptr) {
          block->prev->next = block;
        } else {  // the segment's first block from now on
          segments_.at(block->ptr).head = block;
          block->segment_context = std::move(neighbour->segment_context);
        }
      } else {
        block->next = neighbour->next;
        if (block->next != nullptr) {
          block->next->prev = block;
        }
      }
      block->size += neighbour->size;
      keep_block(std::unique_ptr<Block>(neighbour));
    }
    if (block->prev != nullptr || block->next != nullptr) {
      stat_increase(stats_.inactive_split, small, 1);
      stat_increase(stats_.inactive_split_bytes, small, block->size);
    }
    insert_free(*block->pool, block);
  }

  // One allocation and one free of a small tensor, repeated, split a free
  // block and merge it back each time: the set node and the Block that the
  // last removal and merge gave up are kept for the next insertion and
  // split, so such a loop takes nothing from the heap.
  void keep_node(FreeBlocks::node_type node) {
    if (spare_node_.empty()) {
      spare_node_ = std::move(node);
    }
  }

  void insert_free(BlockPool& pool, Block* block) {
    if (spare_node_.empty()) {
      pool.blocks.insert(block);
      return;
    }
    spare_node_.value() = block;
    pool.blocks.insert(std::move(spare_node_));
  }

  void keep_block(std::unique_ptr<Block> block) {
    if (spare_block_ == nullptr) {
      *block = Block();  // nothing of the merged block's state stays
      spare_block_ = std::move(block);
    }
  }

  std::unique_ptr<Block> make_block() {
    if (spare_block_ != nullptr) {
      return std::move(spare_block_);
    }
    return std::make_unique<Block>();
  }

  void free_segment(Block* block) {
    std::unique_ptr<Block> owned(block);
    if (history_on()) {
      note(TraceAction::kSegmentFree, block->ptr, block->size, block->stream,
           nullptr);
    }
    runtime::provider().free(device_, block->ptr);
    segments_.erase(block->ptr);
    if (block->pool->owner != nullptr) {
      --block->pool->owner->segments;
    }
    ++stats_.num_device_free;
    stat_decrease(stats_.segment, block->pool->is_small, 1);
    stat_decrease(stats_.reserved_bytes, block->pool->is_small, block->size);
  }

  // Returns every cached segment to the runtime that no work can use any
  // more. A free block whose stream may still run work queued before its
  // free (its own stream reuses it at once, ordered by the queue) is not yet
  // safe to return: the segments leave the pools first, so nothing reuses
  // them, and are freed only after a position recorded on their streams
  // afterwards has been reached. The lock is released while waiting (no lock
  // is held while the device works), and waiting reports no asynchronous
  // error: those belong to the user's next synchronizing call.
  void release_cached(std::unique_lock<std::mutex>& lock) {
    // Frees that wait for other streams' work (record_stream, or every free
    // without caching): wait for that work, so those blocks come back too.
    c10::SmallVector<runtime::EventHandle, 8> waits;
    for (const auto& [event, block] : pending_) {
      waits.push_back(event);
    }
    if (!waits.empty()) {
      lock.unlock();
      for (runtime::EventHandle event : waits) {
        // A pooled event may have been re-recorded meanwhile: that only
        // makes the wait longer, never too short.
        runtime::provider().event_wait(device_, event);
      }
      lock.lock();
      process_events();
    }
    std::vector<Block*> segments;
    c10::SmallVector<BlockPool*, 8> pools{&small_, &large_};
    for (auto& [id, pool] : private_pools_) {
      if (pool->use_count == 0) {  // no graph replays it any more
        pools.push_back(&pool->small);
        pools.push_back(&pool->large);
      }
    }
    for (BlockPool* pool : pools) {
      for (auto it = pool->blocks.begin(); it != pool->blocks.end();) {
        Block* block = *it;
        if (block->prev == nullptr && block->next == nullptr) {
          it = pool->blocks.erase(it);
          segments.push_back(block);
        } else {
          ++it;
        }
      }
    }
    if (segments.empty()) {
      return;
    }
    c10::SmallVector<std::pair<c10::StreamId, runtime::EventHandle>, 8> marks;
    const auto mark = [&](c10::StreamId stream) {
      const bool seen = std::any_of(
          marks.begin(), marks.end(),
          [&](const auto& m) { return m.first == stream; });
      if (!seen) {
        runtime::EventHandle event = take_event();
        runtime::provider().event_record(device_, event,
                                         native_stream(stream_of(stream)));
        marks.emplace_back(stream, event);
      }
    };
    for (const Block* block : segments) {
      mark(block->stream);
      if (block->pool->owner != nullptr) {
        for (c10::StreamId stream : block->pool->owner->streams) {
          mark(stream);  // replays may run on other streams
        }
      }
    }
    lock.unlock();
    for (const auto& mark : marks) {
      runtime::provider().event_wait(device_, mark.second);
    }
    lock.lock();
    for (Block* block : segments) {
      free_segment(block);
    }
    for (const auto& m : marks) {
      events_.push_back(m.second);
    }
    for (auto it = private_pools_.begin(); it != private_pools_.end();) {
      if (it->second->use_count == 0 && it->second->segments == 0) {
        it = private_pools_.erase(it);
      } else {
        ++it;
      }
    }
  }

  c10::Stream stream_of(c10::StreamId id) const {
    return c10::Stream(c10::Stream::UNSAFE, c10::Device(kInfini, device_), id);
  }

  // Appends an action to the trace, where the memory history keeps one;
  // under the lock. `addr` is the oom entry's free device bytes. Callers
  // test history_on() first (once per allocation or free, on the hot path):
  // reading the settings takes their lock.
  void note(TraceAction action, uint64_t addr, size_t size,
            c10::StreamId stream, const Context& context) {
    const HistorySettings s = history_settings();
    if (!s.trace || ((s.skipped >> static_cast<int>(action)) & 1u) != 0) {
      return;
    }
    const bool allocating = action == TraceAction::kAlloc ||
                            action == TraceAction::kSegmentAlloc ||
                            action == TraceAction::kOom;
    const bool frames = allocating ? s.context_alloc : s.context_free;
    trace_.push({action, addr, size, stream, now_us(),
                 frames ? context : nullptr},
                s.max_entries);
  }

  void note(TraceAction action, const char* ptr, size_t size,
            c10::StreamId stream, const Context& context) {
    note(action, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ptr)),
         size, stream, context);
  }

  void process_events() {
    if (!capturing_.empty()) {
      // Querying events is unsafe during a capture (CUDA's global mode
      // refuses it); frees complete once the captures end.
      return;
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (!runtime::provider().event_query(device_, it->first)) {
        ++it;
        continue;
      }
      events_.push_back(it->first);
      Block* block = it->second;
      it = pending_.erase(it);
      if (--block->pending_events == 0) {
        release_block(block, history_on());
      }
    }
  }

  runtime::EventHandle take_event() {
    if (!events_.empty()) {
      runtime::EventHandle ev = events_.back();
      events_.pop_back();
      return ev;
    }
    return runtime::provider().event_create(device_, /*timing=*/false,
                                            /*blocking=*/false);
  }

  static std::string format_bytes(size_t bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double value = static_cast<double>(bytes);
    int unit = 0;
    while (value >= 1024 && unit < 4) {
      value /= 1024;
      ++unit;
    }
    char text[32];
    std::snprintf(text, sizeof(text), unit == 0 ? "%.0f %s" : "%.2f %s",
                  value, units[unit]);
    return text;
  }

  const c10::DeviceIndex device_;
  const bool caching_;
  std::mutex mutex_;
  BlockPool small_{true};
  BlockPool large_{false};
  struct Segment {
    size_t bytes;
    Block* head;  // its first block (the others follow through `next`)
  };
  std::map<char*, Segment> segments_;  // by base address
  TraceRing trace_;
  std::deque<std::pair<runtime::EventHandle, Block*>> pending_;
  std::vector<runtime::EventHandle> events_;
  std::map<c10::MempoolId_t, std::unique_ptr<PrivatePool>> private_pools_;
  // The pools captures allocate into, each with its test of a stream.
  std::vector<std::pair<c10::MempoolId_t, std::function<bool(c10::StreamId)>>>
      capturing_;
  std::vector<Block*> deferred_;  // frees whose events wait for no capture
  DeviceStats stats_;
  size_t limit_ = std::numeric_limits<size_t>::max();
  FreeBlocks::node_type spare_node_;  // see keep_node
  std::unique_ptr<Block> spare_block_;
};

std::vector<std::unique_ptr<DeviceCache>>& caches() {
  // Leaked on purpose: tensors may be freed during interpreter shutdown.
  static auto& all = *std::make_unique<std::vector<std::unique_ptr<DeviceCache>>>([] {
    std::vector<std::unique_ptr<DeviceCache>> v;
    const bool caching = parse_caching_enabled();
    for (int i = 0; i < device_count(); ++i) {
      v.push_back(std::make_unique<DeviceCache>(i, caching));
    }
    return v;
  }()).release();
  return all;
}

// The cache of a device index a caller passed.
DeviceCache& cache(c10::DeviceIndex device) {
  check_device(device);
  return *caches()[device];
}

// The cache of the calling thread's current device. current_device() is 0
// until set_device, which checks every index it sets, so the one index that
// can be invalid here is that 0 in a process without a device: check_device
// raises for it (saying why) every time, since the count is fixed once
// counted, and once it passed nothing is left to check.
DeviceCache& current_cache(c10::DeviceIndex device) {
  static const bool device_exists = (check_device(0), true);
  (void)device_exists;
  return *caches()[device];
}

// The cache that allocated `block` (its device was valid then).
DeviceCache& cache_of(const Block* block) {
  return *caches()[block->device];
}

CallHistory call_history(bool allocating) {
  CallHistory history;
  history.on = history_on();
  if (history.on) {
    const HistorySettings s = history_settings();
    history.context = gather_context(
        allocating ? s.context_state : s.context_free, s.cpp);
  }
  return history;
}

void delete_block(void* ctx) {
  if (ctx == nullptr || runtime::in_bad_fork()) {
    return;  // a forked child leaves the parent's blocks alone
  }
  auto* block = static_cast<Block*>(ctx);
  cache_of(block).free(block, call_history(/*allocating=*/false));
}

class InfiniDeviceAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    const c10::DeviceIndex device = current_device();
    const c10::Device where(kInfini, device);
    mark_initialized();
    if (n == 0) {
      return {nullptr, nullptr, &delete_block, where};
    }
    Block* block = current_cache(device).malloc(
        n, current_stream_of_valid_device(device).id(),
        call_history(/*allocating=*/true));
    return {block->ptr, block, &delete_block, where};
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    const c10::DeviceIndex device = current_device();
    runtime::StreamHandle stream = native_stream(current_stream(device));
    runtime::provider().memcpy_async(device, dest, src, count,
                                     runtime::MemcpyKind::kDeviceToDevice,
                                     stream);
    runtime::provider().stream_synchronize(device, stream);
  }

  bool initialized() override { return is_initialized(); }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    allocator::empty_cache();
  }

  void recordStream(const c10::DataPtr& ptr, c10::Stream stream) override {
    allocator::record_stream(ptr, stream);
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    return stats(device);
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    reset_accumulated_stats(device);
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    reset_peak_stats(device);
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    size_t free_bytes = 0;
    size_t total_bytes = 0;
    runtime::provider().mem_get_info(resolve_device(device), &free_bytes,
                                     &total_bytes);
    return {free_bytes, total_bytes};
  }
};

InfiniDeviceAllocator the_allocator;

}  // namespace

c10::DeviceAllocator* get() {
  return &the_allocator;
}

void record_stream(const c10::DataPtr& ptr, c10::Stream stream) {
  if (ptr.get_context() == nullptr) {
    return;  // zero-size tensors own no block
  }
  TORCH_CHECK(ptr.get_deleter() == &delete_block,
              "record_stream: this storage was not allocated by the infini "
              "device allocator");
  check_stream(stream);
  auto* block = static_cast<Block*>(ptr.get_context());
  cache_of(block).record_stream(block, stream);
}

c10::DeviceIndex device_of_pointer(const void* ptr) {
  auto& all = caches();
  for (size_t i = 0; i < all.size(); ++i) {
    if (all[i]->contains(ptr)) {
      return static_cast<c10::DeviceIndex>(i);
    }
  }
  return -1;
}

DeviceStats stats(c10::DeviceIndex device) {
  return cache(resolve_device(device)).stats();
}

void reset_peak_stats(c10::DeviceIndex device) {
  cache(resolve_device(device)).reset_peak();
}

void reset_accumulated_stats(c10::DeviceIndex device) {
  cache(resolve_device(device)).reset_accumulated();
}

MemorySnapshot snapshot() {
  MemorySnapshot out;
  out.device_traces.resize(caches().size());
  for (auto& c : caches()) {
    c->snapshot(out);
  }
  return out;
}

void record_memory_history(const HistorySettings& settings,
                           bool clear_history) {
  set_history_settings(settings);
  if (clear_history || !history_on()) {
    for (auto& c : caches()) {
      c->clear_trace();
    }
  }
}

void empty_cache() {
  for (auto& c : caches()) {
    c->empty_cache();
  }
}

void begin_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool,
                            std::function<bool(c10::StreamId)> capturing) {
  cache(device).begin_allocate_to_pool(pool, std::move(capturing));
}

void end_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  cache(device).end_allocate_to_pool(pool);
}

void release_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
  cache(device).release_pool(pool);
}

void note_pool_stream(c10::DeviceIndex device, c10::MempoolId_t pool,
                      c10::StreamId stream) {
  cache(device).note_pool_stream(pool, stream);
}

void set_memory_fraction(double fraction, c10::DeviceIndex device) {
  TORCH_CHECK(fraction >= 0.0 && fraction <= 1.0,
              "set_per_process_memory_fraction: fraction must be in [0, 1], "
              "got ", fraction);
  device = resolve_device(device);
  size_t free_bytes = 0;
  size_t total_bytes = 0;
  runtime::provider().mem_get_info(device, &free_bytes, &total_bytes);
  cache(device).set_limit(
      static_cast<size_t>(fraction * static_cast<double>(total_bytes)));
}

bool caching_enabled() {
  static const bool enabled = parse_caching_enabled();
  return enabled;
}

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &the_allocator);

}  // namespace torch_infini::allocator
