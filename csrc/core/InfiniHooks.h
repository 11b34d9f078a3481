#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

namespace torch_infini {

// Registers the PrivateUse1 hooks (called once, when torch_infini loads).
void register_hooks();

// The pinned-memory seam of the hooks: the pinned host allocator installs
// itself here; until it does, asking for pinned memory fails clearly.
struct PinnedMemoryHooks {
  bool (*is_pinned_fn)(const void*) = nullptr;
  c10::Allocator* pinned_allocator = nullptr;

  bool is_pinned(const void* data) const {
    return is_pinned_fn != nullptr && is_pinned_fn(data);
  }
  c10::Allocator* allocator() const;
};

PinnedMemoryHooks& pinned_memory_hooks();

// Grows or shrinks a storage of the infini device, keeping its contents
// (defined with the resize op in ops/).
void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes);

}  // namespace torch_infini
