// The pinned host allocator of the infini device, registered as PyTorch's
// host allocator for PrivateUse1 (pin_memory("infini"), is_pinned("infini"),
// DataLoader's pin_memory_device) and through the hooks.
//
// Blocks come from the provider's MallocHost, rounded up to a power of two
// and cached by size. A block that asynchronous copies used is reused only
// after the events recorded for those copies have completed: freeing never
// blocks the host. A block keeps one event per stream that copied it, re-
// recorded by each later copy on that stream (a stream runs in order, so its
// last copy's completion covers the earlier ones): a long-lived buffer used
// by any number of copies holds a bounded number of events.

// PyTorch's header aligns its free lists to
// std::hardware_destructive_interference_size, and GCC warns at every use
// that the value may differ between compilers. This file uses only the
// header's HostAllocator interface and HostStats, none of the aligned
// structures, so the warning is silenced for this include only.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winterference-size"
#endif
#include <ATen/core/CachingHostAllocator.h>
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#include <c10/util/Exception.h>
#include <c10/util/llvmMathExtras.h>

#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/InfiniHooks.h"
#include "core/InfiniHostAllocator.h"
#include "core/InfiniStream.h"
#include "runtime/runtime.h"

namespace torch_infini::pinned {
namespace {

using c10::CachingAllocator::Stat;

constexpr size_t kMinBlock = 512;

struct Block {
  char* ptr = nullptr;
  size_t size = 0;
  bool allocated = false;
  // The last copy on each stream that used the block since it was last
  // handed out: (stream, event recorded after that copy).
  struct Use {
    c10::Stream stream;
    runtime::EventHandle event;
  };
  std::vector<Use> uses;
};

void delete_pinned(void* ctx);

class PinnedHostAllocator final : public at::HostAllocator {
 public:
  at::DataPtr allocate(size_t n) override {
    if (n == 0) {
      return {nullptr, nullptr, &delete_pinned, at::DeviceType::CPU};
    }
    const size_t size = std::max(kMinBlock, c10::llvm::PowerOf2Ceil(n));
    std::lock_guard<std::mutex> guard(mutex_);
    process_pending();
    Block* block = nullptr;
    auto& bucket = free_[size];
    if (!bucket.empty()) {
      block = bucket.back();
      bucket.pop_back();
    } else {
      void* ptr = runtime::provider().malloc_host(size);
      TORCH_CHECK_WITH(OutOfMemoryError, ptr != nullptr,
                       "infini: could not allocate ", size,
                       " bytes of pinned host memory");
      auto owned = std::make_unique<Block>();
      block = owned.get();
      block->ptr = static_cast<char*>(ptr);
      block->size = size;
      by_address_.emplace(block->ptr, std::move(owned));
      ++stats_.num_host_alloc;
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(size);
    }
    block->allocated = true;
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(size);
    return {block->ptr, block, &delete_pinned, at::DeviceType::CPU};
  }

  void free(Block* block) {
    std::lock_guard<std::mutex> guard(mutex_);
    block->allocated = false;
    stats_.active_requests.decrease(1);
    stats_.active_bytes.decrease(block->size);
    if (block->uses.empty()) {
      free_[block->size].push_back(block);
    } else {
      pending_.push_back(block);
    }
  }

  bool record_event(void* /*ptr*/, void* ctx, c10::Stream stream) override {
    if (ctx == nullptr) {
      return false;
    }
    auto* block = static_cast<Block*>(ctx);
    const int device = stream.device_index();
    auto& rt = runtime::provider();
    // Recording never waits on the queue (the host runtime queues event
    // records without backpressure), so it may happen under the lock, which
    // keeps a re-record and process_pending() from interleaving.
    std::lock_guard<std::mutex> guard(mutex_);
    for (Block::Use& use : block->uses) {
      if (use.stream == stream) {
        rt.event_record(device, use.event, native_stream(stream));
        return true;
      }
    }
    runtime::EventHandle ev = rt.event_create(device, false, false);
    rt.event_record(device, ev, native_stream(stream));
    block->uses.push_back(Block::Use{stream, ev});
    return true;
  }

  bool is_pinned(const void* p) {
    std::lock_guard<std::mutex> guard(mutex_);
    const char* c = static_cast<const char*>(p);
    auto it = by_address_.upper_bound(const_cast<char*>(c));
    if (it == by_address_.begin()) {
      return false;
    }
    --it;
    const Block& b = *it->second;
    return c >= b.ptr && c < b.ptr + b.size;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> guard(mutex_);
    process_pending();
    for (auto& [size, bucket] : free_) {
      for (Block* block : bucket) {
        runtime::provider().free_host(block->ptr);
        ++stats_.num_host_free;
        stats_.allocations.decrease(1);
        stats_.allocated_bytes.decrease(block->size);
        by_address_.erase(block->ptr);
      }
      bucket.clear();
    }
  }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    std::memcpy(dest, src, count);
  }

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> guard(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> guard(mutex_);
    for (Stat* s : {&stats_.active_requests, &stats_.active_bytes,
                    &stats_.allocations, &stats_.allocated_bytes}) {
      s->reset_accumulated();
    }
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> guard(mutex_);
    for (Stat* s : {&stats_.active_requests, &stats_.active_bytes,
                    &stats_.allocations, &stats_.allocated_bytes}) {
      s->reset_peak();
    }
  }

 private:
  // Moves freed blocks whose copies have all completed back to the cache.
  void process_pending() {
    auto& rt = runtime::provider();
    for (auto it = pending_.begin(); it != pending_.end();) {
      Block* block = *it;
      auto& uses = block->uses;
      for (auto use = uses.begin(); use != uses.end();) {
        const int device = use->stream.device_index();
        if (rt.event_query(device, use->event)) {
          rt.event_destroy(device, use->event);
          use = uses.erase(use);
        } else {
          ++use;
        }
      }
      if (uses.empty()) {
        free_[block->size].push_back(block);
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
  }

  std::mutex mutex_;
  std::map<char*, std::unique_ptr<Block>> by_address_;
  std::unordered_map<size_t, std::vector<Block*>> free_;
  std::deque<Block*> pending_;
  at::HostStats stats_;
};

PinnedHostAllocator& allocator() {
  // Leaked on purpose: pinned tensors may be freed during interpreter
  // shutdown.
  static auto& instance = *std::make_unique<PinnedHostAllocator>().release();
  return instance;
}

void delete_pinned(void* ctx) {
  if (ctx != nullptr && !runtime::in_bad_fork()) {
    allocator().free(static_cast<Block*>(ctx));
  }
}

bool is_pinned_pointer(const void* p) {
  return p != nullptr && allocator().is_pinned(p);
}

struct Registration {
  Registration() {
    at::setHostAllocator(c10::DeviceType::PrivateUse1, &allocator());
    pinned_memory_hooks().is_pinned_fn = &is_pinned_pointer;
    pinned_memory_hooks().pinned_allocator = &allocator();
  }
};

Registration registration;

}  // namespace

bool is_pinned(const void* ptr) {
  return is_pinned_pointer(ptr);
}

bool record_copy(const at::DataPtr& host_ptr, c10::Stream stream) {
  if (host_ptr.get_deleter() != &delete_pinned) {
    return false;
  }
  return allocator().record_event(host_ptr.get(), host_ptr.get_context(),
                                  stream);
}

}  // namespace torch_infini::pinned
