#include "runtime/host/task_memory.h"

#include <atomic>
#include <cstdint>

namespace torch_infini::runtime::host::task_memory {
namespace {

// Size classes 64, 128, ..., 2048 bytes: a task's inline-too-large callable
// (the element-wise kernels' 464-byte argument records) and a generic call's
// shared record (about 1 KiB) fit; anything larger is malloc's, as before.
constexpr size_t kSmallest = 64;
constexpr int kClasses = 6;
// Free blocks a thread keeps per class beyond those in flight: a stream's
// queue holds at most 1024 tasks (HostStream::kMaxQueueDepth), so a loop that
// fills one circulates at most that many.
constexpr size_t kKeptPerClass = 1024;

int size_class(size_t bytes) {
  size_t size = kSmallest;
  for (int c = 0; c < kClasses; ++c, size *= 2) {
    if (bytes <= size) {
      return c;
    }
  }
  return -1;
}

size_t class_bytes(int c) {
  return kSmallest << c;
}

struct FreeBlock {
  FreeBlock* next;
};

// The blocks freed since an allocating thread last took them, per class.
// `count` is approximate (it is bumped after the push): it only bounds what
// a thread keeps.
struct alignas(64) Returned {
  std::atomic<FreeBlock*> head{nullptr};
  std::atomic<size_t> count{0};
};
Returned returned[kClasses];

void free_list(FreeBlock* block) noexcept {
  while (block != nullptr) {
    FreeBlock* next = block->next;
    ::operator delete(block);
    block = next;
  }
}

// A thread's own free blocks: taken without synchronization.
struct ThreadBlocks {
  FreeBlock* head[kClasses] = {};
  ThreadBlocks() = default;
  ThreadBlocks(const ThreadBlocks&) = delete;
  ThreadBlocks& operator=(const ThreadBlocks&) = delete;
  // Emptied, not only freed: a task queued from this thread after its
  // thread-locals are destroyed (a static's destructor at exit) then
  // allocates from malloc instead of taking a freed block.
  ~ThreadBlocks() {
    for (FreeBlock*& list : head) {
      free_list(list);
      list = nullptr;
    }
  }

  // Takes the blocks freed so far, keeping at most kKeptPerClass.
  void refill(int c) {
    FreeBlock* list = returned[c].head.exchange(nullptr, std::memory_order_acquire);
    const size_t count = returned[c].count.exchange(0, std::memory_order_relaxed);
    if (list != nullptr && count > kKeptPerClass) {
      FreeBlock* last = list;
      for (size_t i = 1; i < kKeptPerClass && last->next != nullptr; ++i) {
        last = last->next;
      }
      free_list(last->next);
      last->next = nullptr;
    }
    head[c] = list;
  }
};

thread_local ThreadBlocks thread_blocks;

}  // namespace

void* allocate(size_t bytes) {
  const int c = size_class(bytes);
  if (c < 0) {
    return ::operator new(bytes);
  }
  ThreadBlocks& mine = thread_blocks;
  if (mine.head[c] == nullptr) {
    mine.refill(c);
  }
  if (FreeBlock* block = mine.head[c]) {
    mine.head[c] = block->next;
    return block;
  }
  return ::operator new(class_bytes(c));
}

void deallocate(void* block, size_t bytes) noexcept {
  const int c = size_class(bytes);
  if (c < 0) {
    ::operator delete(block);
    return;
  }
  auto* freed = static_cast<FreeBlock*>(block);
  Returned& to = returned[c];
  freed->next = to.head.load(std::memory_order_relaxed);
  while (!to.head.compare_exchange_weak(freed->next, freed,
                                        std::memory_order_release,
                                        std::memory_order_relaxed)) {
  }
  to.count.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace torch_infini::runtime::host::task_memory
