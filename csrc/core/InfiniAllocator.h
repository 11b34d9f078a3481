#pragma once

// The device allocator of the infini device: a caching allocator in the
// style of PyTorch's CUDA one, registered as PrivateUse1's c10::DeviceAllocator.
//
// - Blocks are rounded to 512 bytes and carved from segments obtained from the
//   runtime: 2 MiB segments for requests up to 1 MiB (small pool), 20 MiB for
//   requests up to 10 MiB, the request rounded to 2 MiB above (large pool).
// - Pools are per device and keyed by stream: a block freed by stream S is
//   reused at once by S (S's queue orders the reuse after the old work), never
//   by another stream until events recorded at free time on every stream that
//   used it (record_stream) have completed. Freeing never blocks the host.
// - Free neighbouring blocks of a segment merge; empty_cache (and an
//   allocation that does not fit) returns unused segments to the runtime once
//   the streams that used them have reached a position recorded after their
//   free, waiting without the allocator lock and without reporting pending
//   asynchronous errors (those belong to the user's synchronizing calls).
// - TORCH_INFINI_ALLOC_CONF="caching:0" turns caching off for debugging:
//   every block is its own segment, returned to the runtime as soon as the
//   streams that used it are done.

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/Stream.h>

#include <functional>
#include <string>

namespace torch_infini::allocator {

c10::DeviceAllocator* get();

// Keeps `ptr`'s block from being reused until the work queued on `stream`
// so far has finished (Tensor.record_stream).
void record_stream(const c10::DataPtr& ptr, c10::Stream stream);

// The device that allocated `ptr` (any address inside a live block), or -1.
c10::DeviceIndex device_of_pointer(const void* ptr);

c10::CachingDeviceAllocator::DeviceStats stats(c10::DeviceIndex device);
void reset_peak_stats(c10::DeviceIndex device);
void reset_accumulated_stats(c10::DeviceIndex device);
void empty_cache();
// Caps what the allocator reserves on `device` to fraction * total memory.
void set_memory_fraction(double fraction, c10::DeviceIndex device);
bool caching_enabled();

// Graph-private pools (core/InfiniGraph.h), as CUDA's caching allocator has:
// between begin and end, allocations on `device` from streams `capturing`
// accepts come from pool `pool`, which keeps its blocks for the graphs that
// captured into it (shared by graphs passing the same id) until every one
// has released it; empty_cache then returns its free segments.
void begin_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool,
                            std::function<bool(c10::StreamId)> capturing);
void end_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool);
void release_pool(c10::DeviceIndex device, c10::MempoolId_t pool);
// Work queued on `stream` may use the pool's memory (a replay there): its
// segments are returned only after that work.
void note_pool_stream(c10::DeviceIndex device, c10::MempoolId_t pool,
                      c10::StreamId stream);

}  // namespace torch_infini::allocator
