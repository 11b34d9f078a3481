#pragma once

// Streams of the infini device, in the shape of c10::cuda::CUDAStream: a
// default stream and a lazily created pool per device and priority, and a
// current stream per thread and per device.
//
// Stream ids: 0 is the default stream; pool streams are
// 1 + level * kStreamsPerPool + index, level 0 for priority 0 and level 1 for
// priority -1 (higher priority, as in CUDA lower numbers are higher).

#include <c10/core/Stream.h>

#include "runtime/runtime.h"

namespace torch_infini {

constexpr int kStreamsPerPool = 8;
constexpr int kLowestStreamPriority = 0;    // the default
constexpr int kHighestStreamPriority = -1;  // CUDA's convention

c10::Stream current_stream(c10::DeviceIndex device = -1);
// The current stream of `device`, an index its caller has validated (a
// tensor's, or one a device guard made current): for hot paths that have
// resolved their device once and must not check it again on every call.
c10::Stream current_stream_of_valid_device(c10::DeviceIndex device);
c10::Stream default_stream(c10::DeviceIndex device = -1);
// A pool stream with `priority` clamped to [kHighestStreamPriority,
// kLowestStreamPriority], handed out round-robin.
c10::Stream stream_from_pool(int priority, c10::DeviceIndex device = -1);
void set_current_stream(const c10::Stream& stream);

int stream_priority(const c10::Stream& stream);
// The provider's handle for `stream` (created on first use).
runtime::StreamHandle native_stream(const c10::Stream& stream);
// The id of the stream whose provider handle is `handle` (0 for nullptr, the
// default stream), or -1 when this process made no such stream. Creates
// nothing (the profiler names its device lanes with it).
c10::StreamId stream_id_of_handle(c10::DeviceIndex device,
                                  runtime::StreamHandle handle);
// Raises unless `stream` is a valid infini stream.
void check_stream(const c10::Stream& stream);

}  // namespace torch_infini
