#pragma once

// CPU aliases of device tensors: how the host runtime's CPU kernels see
// device memory. Each device tensor becomes a CPU tensor over the same
// memory, with its conjugate and negative bits; tensors sharing a device
// storage share one CPU storage, so CPU's kernels see the aliasing (and
// refuse or handle overlaps as on the CPU).
//
// A queued call's aliases are built on the thread that runs it, from
// snapshots of its tensors' layouts taken when it was queued (QueuedArgs).
// That keeps the aliases' allocations on the thread that frees them: made by
// the caller and freed by the worker, they contended for glibc's arena lock
// on every queued call. It also takes their cost off the submitting thread.

#include <ATen/core/Tensor.h>
#include <ATen/core/stack.h>
#include <c10/util/SmallVector.h>

#include <array>
#include <optional>
#include <utility>

namespace torch_infini::runtime::host {

// A device tensor's layout, as an alias is built from it: a snapshot's, or
// a live tensor's (a call run at once takes no snapshot).
struct TensorLayout {
  const c10::TensorImpl* impl = nullptr;  // identity: the same tensor twice
  const c10::StorageImpl* storage = nullptr;  // identity: shared memory
  void* storage_data = nullptr;
  size_t storage_nbytes = 0;
  c10::IntArrayRef sizes;
  c10::IntArrayRef strides;
  int64_t offset = 0;
  caffe2::TypeMeta dtype;
  bool conj = false;
  bool neg = false;

  // `t`: a defined device tensor, which must outlive the layout.
  static TensorLayout of(const at::Tensor& t);
};

// A device tensor's layout when its call was queued. Its memory stays alive
// for the stream's queued work through the allocator (as for every queued
// kernel); the tensor itself is not kept, so its metadata may change, or it
// may be freed, before the task runs.
struct TensorSnapshot {
  const c10::TensorImpl* impl = nullptr;  // identity: the same tensor twice
  const c10::StorageImpl* storage = nullptr;  // identity: shared memory
  void* storage_data = nullptr;
  size_t storage_nbytes = 0;
  c10::SmallVector<int64_t, 5> sizes;
  c10::SmallVector<int64_t, 5> strides;
  int64_t offset = 0;
  caffe2::TypeMeta dtype;
  bool conj = false;
  bool neg = false;
  bool none = false;  // a Tensor?[]'s None
  at::Tensor kept;  // undefined and CPU tensors: passed as they are

  static TensorSnapshot of(const at::Tensor& t);
  // Its layout (impl != nullptr), valid while the snapshot lives.
  TensorLayout layout() const;
};

// A thread's aliases of earlier queued calls, taken again by a later call
// whose tensor has the same memory and layout: building an alias (a
// TensorImpl and a StorageImpl) and destroying it cost more than a small
// CPU kernel, and a loop passes the same tensors, or new ones in the same
// reused memory, to every call. An alias is taken only when it is exactly
// what Aliases would build: nothing but the pool holds it or its storage,
// its storage is the device memory's (not grown into host memory by a
// kernel) and every part of its metadata equals the snapshot's. So a
// kernel that kept, resized, restrided or flipped a bit of its alias only
// makes the next call build a new one. One pool per thread (the stream's
// worker, or a caller running queued work while it waits): no locks.
// Looked up by the memory's address: an alias can be in one of two places,
// so a lookup reads two entries, not the whole pool.
class AliasPool {
 public:
  // An alias of `t` to take, or an undefined tensor.
  at::Tensor take(const TensorLayout& t);
  // Offers a new alias to later calls (in place of one nothing uses).
  void keep(const at::Tensor& alias);
  // An alias of `t` alone (no other tensor of its call is known to share
  // its memory): taken from the pool, or built and offered to it. What the
  // tables' kernels (runtime/kernels.h) run on.
  at::Tensor alias_of(const TensorLayout& t);

 private:
  static constexpr size_t kSize = 16;  // a power of two
  struct Entry {
    at::Tensor alias;
    c10::DispatchKeySet keys;  // as built: CPU, and its conj/neg bits
  };
  // The first of the two entries for memory at `data`.
  static size_t place_of(const void* data);
  std::array<Entry, kSize> entries_;
};

// The calling thread's pool.
AliasPool& thread_alias_pool();

class Aliases {
 public:
  // `pool`: where a queued call's aliases are taken from and offered to
  // (none: every alias is new, as for a direct run's).
  explicit Aliases(AliasPool* pool = nullptr) : pool_(pool) {}

  // `value` with its device tensors replaced by aliases, and a device
  // argument (a factory's) by the CPU.
  c10::IValue convert(const c10::IValue& value);
  // A call's arguments, each converted.
  torch::jit::Stack convert_all(c10::ArrayRef<c10::IValue> values);
  at::Tensor of(const at::Tensor& t);
  at::Tensor of(const TensorSnapshot& t);

 private:
  at::Tensor of(const TensorLayout& t);

  AliasPool* pool_;
  c10::SmallVector<std::pair<const c10::TensorImpl*, at::Tensor>, 6> tensors_;
  // A call has a few storages: a linear search beats hashing, and a small
  // vector needs no heap allocation.
  c10::SmallVector<
      std::pair<const c10::StorageImpl*, std::optional<c10::Storage>>, 6>
      storages_;
};

// A queued call's arguments (and the results a functional overload is
// copied into): its other values as they are, its device tensors (alone,
// or in a Tensor[] or Tensor?[]) as snapshots.
class QueuedArgs {
 public:
  // On the submitting thread: the call's arguments, and the tensors a
  // functional overload's results are copied into.
  QueuedArgs(torch::jit::Stack args, c10::ArrayRef<at::Tensor> results);
  // On the thread that runs the call (as often as it runs: a captured
  // graph replays it): the stack of CPU aliases, and the aliases of the
  // results.
  torch::jit::Stack stack(Aliases& aliases) const;
  c10::SmallVector<at::Tensor, 2> results(Aliases& aliases) const;

 private:
  enum class Kind : uint8_t { kTensor, kTensorList, kOptionalTensorList };
  struct Slot {
    uint32_t position;  // in values_
    Kind kind;
    uint32_t first;  // in tensors_
    uint32_t count;
  };

  // A snapshot's place holds None. Inline, not the call's own stack: that
  // vector was allocated on the submitting thread, and freeing it on the
  // worker takes malloc's arena lock (see runtime/host/task_memory.h).
  c10::SmallVector<c10::IValue, 6> values_;
  c10::SmallVector<Slot, 4> slots_;
  c10::SmallVector<TensorSnapshot, 3> tensors_;
  c10::SmallVector<TensorSnapshot, 1> results_;
};

}  // namespace torch_infini::runtime::host
