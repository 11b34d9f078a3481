#pragma once

// The pinned host allocator (see InfiniHostAllocator.cpp).

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>

namespace torch_infini::pinned {

// True when `ptr` lies in a block of the infini pinned host allocator.
bool is_pinned(const void* ptr);

// Keeps the pinned block behind `host_ptr` from being reused until the work
// queued on `stream` so far (an asynchronous copy) has finished. Returns false
// when `host_ptr` is not from the pinned allocator.
bool record_copy(const at::DataPtr& host_ptr, c10::Stream stream);

}  // namespace torch_infini::pinned
