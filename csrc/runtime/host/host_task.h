#pragma once

// The host runtime's unit of queued work, and the queue that holds it.
//
// Why not std::function and std::deque: the submitting thread allocated the
// storage of every task (std::function keeps a callable on the heap unless
// it is trivially copyable and at most 16 bytes: a lambda holding a
// shared_ptr is neither) and the stream's worker freed it, and std::deque
// allocates and frees a node every dozen tasks the same way. A free on
// another thread than the allocation's takes the allocating arena's lock,
// so a loop of small queued ops had the submitter and the worker contend on
// malloc's lock on every call (perf: a tenth of the submitter's time in the
// futex wake-ups of glibc's arena lock, 1000 queued one-element adds). A
// Task keeps a small callable inside itself (a queued ATen call's shared
// record, an event's mark, a copy's pointers), and a TaskRing reuses its
// slots, so queuing such a task allocates nothing once the ring has grown to
// the stream's depth: a queued one-element mul made 1.3 fewer allocations
// and took 8% less of the submitting thread's time.
//
// Why not larger: the element-wise kernels' argument records (three tensor
// layouts, 464 bytes) were measured inline too. Moving them into the slot
// and out to run cost more than the allocation they saved (a queued add
// took 5% longer), so they stay on the heap, as in std::function: in task
// memory (runtime/host/task_memory.h), which hands the worker's frees back
// to the submitting thread rather than to malloc.

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "runtime/host/task_memory.h"

namespace torch_infini::runtime::host {

class Task {
 public:
  // Two shared pointers, or a std::function. A larger callable (or one
  // that may throw when moved) is kept on the heap, as std::function would.
  static constexpr size_t kInlineBytes = 48;

  Task() noexcept = default;
  Task(std::nullptr_t) noexcept {}  // NOLINT: as std::function
  template <typename F,
            typename = std::enable_if_t<
                !std::is_same_v<std::decay_t<F>, Task> &&
                !std::is_same_v<std::decay_t<F>, std::nullptr_t>>>
  Task(F&& fn) {  // NOLINT: implicit, as std::function's
    using Fn = std::decay_t<F>;
    if constexpr (fits_inline<Fn>()) {
      new (storage_) Fn(std::forward<F>(fn));
      ops_ = &kOps<Fn>;
    } else {
      new (storage_) OnHeap<Fn>(std::forward<F>(fn));
      ops_ = &kOps<OnHeap<Fn>>;
    }
  }
  Task(const Task& other) : ops_(other.ops_) {
    if (ops_ != nullptr) {
      ops_->copy(storage_, other.storage_);
    }
  }
  Task(Task&& other) noexcept : ops_(other.ops_) {
    if (ops_ != nullptr) {
      ops_->move(storage_, other.storage_);
      other.ops_ = nullptr;
    }
  }
  Task& operator=(const Task& other) {
    if (this != &other) {
      Task copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  Task& operator=(Task&& other) noexcept {
    if (this != &other) {
      reset();
      if (other.ops_ != nullptr) {
        other.ops_->move(storage_, other.storage_);
        ops_ = other.ops_;
        other.ops_ = nullptr;
      }
    }
    return *this;
  }
  Task& operator=(std::nullptr_t) noexcept {
    reset();
    return *this;
  }
  ~Task() { reset(); }

  explicit operator bool() const noexcept { return ops_ != nullptr; }

  // Runs the callable (as std::function's operator(), which is const but
  // calls a mutable lambda).
  void operator()() const {
    TORCH_CHECK(ops_ != nullptr, "infini host runtime: an empty task was run");
    ops_->invoke(const_cast<unsigned char*>(storage_));
  }

 private:
  template <typename Fn>
  static constexpr bool fits_inline() {
    return sizeof(Fn) <= kInlineBytes &&
        alignof(Fn) <= alignof(std::max_align_t) &&
        std::is_nothrow_move_constructible_v<Fn>;
  }

  // A callable too large to keep inline (or that may throw when moved), in
  // task memory (runtime/host/task_memory.h): made on the submitting thread,
  // destroyed on the worker, and its block handed back rather than freed.
  template <typename Fn>
  struct OnHeap {
    struct Destroy {
      void operator()(Fn* fn) const noexcept {
        fn->~Fn();
        task_memory::deallocate(fn, sizeof(Fn));
      }
    };
    template <typename... Args>
    static std::unique_ptr<Fn, Destroy> make(Args&&... args) {
      void* block = task_memory::allocate(sizeof(Fn));
      try {
        return std::unique_ptr<Fn, Destroy>(
            new (block) Fn(std::forward<Args>(args)...));
      } catch (...) {
        task_memory::deallocate(block, sizeof(Fn));
        throw;
      }
    }

    template <typename F,
              typename = std::enable_if_t<
                  !std::is_same_v<std::decay_t<F>, OnHeap>>>
    explicit OnHeap(F&& f) : fn(make(std::forward<F>(f))) {}
    OnHeap(const OnHeap& other) : fn(make(*other.fn)) {}
    OnHeap(OnHeap&&) noexcept = default;
    void operator()() { (*fn)(); }

    std::unique_ptr<Fn, Destroy> fn;
  };

  struct Ops {
    void (*invoke)(void* self);
    void (*copy)(void* to, const void* from);
    void (*move)(void* to, void* from) noexcept;  // and destroys `from`
    void (*destroy)(void* self) noexcept;
  };
  template <typename Fn>
  static constexpr Ops kOps = {
      [](void* self) { (*static_cast<Fn*>(self))(); },
      [](void* to, const void* from) {
        new (to) Fn(*static_cast<const Fn*>(from));
      },
      [](void* to, void* from) noexcept {
        new (to) Fn(std::move(*static_cast<Fn*>(from)));
        static_cast<Fn*>(from)->~Fn();
      },
      [](void* self) noexcept { static_cast<Fn*>(self)->~Fn(); },
  };

  void reset() noexcept {
    if (ops_ != nullptr) {
      const Ops* ops = ops_;
      ops_ = nullptr;  // a destructor that queues again sees an empty task
      ops->destroy(storage_);
    }
  }

  alignas(std::max_align_t) unsigned char storage_[kInlineBytes];
  const Ops* ops_ = nullptr;
};

// A FIFO that reuses its slots: it grows (doubling) to the most it has held
// and never shrinks, so a stream queuing at a steady depth allocates nothing.
// Not thread-safe: HostStream holds its lock around every use.
template <typename T>
class TaskRing {
 public:
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  T& front() { return slots_[head_]; }
  // Appends a slot and returns it for the caller to fill (a slot is empty:
  // default-made, or moved from when it was popped).
  T& push_back() {
    if (size_ == slots_.size()) {
      grow();
    }
    T& slot = slots_[(head_ + size_) % slots_.size()];
    ++size_;
    return slot;
  }
  // The front slot is left moved-from (its task empty) by the caller.
  void pop_front() {
    head_ = (head_ + 1) % slots_.size();
    --size_;
  }

 private:
  void grow() {
    std::vector<T> larger(std::max<size_t>(16, slots_.size() * 2));
    for (size_t i = 0; i < size_; ++i) {
      larger[i] = std::move(slots_[(head_ + i) % slots_.size()]);
    }
    slots_ = std::move(larger);
    head_ = 0;
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
};

}  // namespace torch_infini::runtime::host
