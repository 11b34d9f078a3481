#pragma once

// Memory for what a queued task keeps on the heap (a callable too large to
// keep inline, a generic call's shared record), handed back to the threads
// that allocate it instead of freed where the task ends.
//
// Why: a task is made on the submitting thread and destroyed on the stream's
// worker. glibc's free() of another thread's chunk keeps it in the freeing
// thread's cache only while that cache's bin has room (7 chunks), and the
// worker never allocates these sizes: so every task's free took the main
// arena's lock on the worker while the submitter's next malloc took it too.
// perf of 1000 queued one-element adds: the submitting thread spent about a
// tenth of its time waking the worker from that lock (futex_wake from
// __lll_lock_wake_private) and a twentieth asleep on it.
//
// How: blocks come in a few size classes. A thread allocates from its own
// list of free blocks; a block is freed onto a shared list (one
// compare-and-swap, never a lock), which an allocating thread takes whole
// when its own list runs out. Neither side waits for the other, and once the
// blocks circulate a queued task allocates nothing from malloc. Memory kept:
// the blocks in flight at the queue's deepest, and at most kKeptPerClass
// free blocks per class and thread beyond them (the rest go back to malloc).

#include <cstddef>
#include <new>

namespace torch_infini::runtime::host::task_memory {

// `bytes` with the alignment of std::max_align_t; freed with deallocate()
// and the same size, on any thread.
void* allocate(size_t bytes);
void deallocate(void* block, size_t bytes) noexcept;

// A standard allocator over the same memory (for std::allocate_shared).
template <typename T>
struct Allocator {
  using value_type = T;
  Allocator() noexcept = default;
  template <typename U>
  Allocator(const Allocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t));
    return static_cast<T*>(task_memory::allocate(n * sizeof(T)));
  }
  void deallocate(T* p, size_t n) noexcept {
    task_memory::deallocate(p, n * sizeof(T));
  }
  template <typename U>
  bool operator==(const Allocator<U>&) const noexcept {
    return true;
  }
  template <typename U>
  bool operator!=(const Allocator<U>&) const noexcept {
    return false;
  }
};

}  // namespace torch_infini::runtime::host::task_memory
