#pragma once

// The built-in host runtime: an asynchronous accelerator simulated on the
// host. Device memory comes from the host heap (but is only reached through
// the runtime), every stream is a worker-thread queue, events mark queue
// positions, and kernels are CPU ATen kernels run on the workers over aliases
// of device memory.

#include <c10/util/SmallVector.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "runtime/host/host_stream.h"
#include "runtime/runtime.h"

namespace torch_infini::runtime::host {

class HostProvider final : public Provider {
 public:
  HostProvider();

  const char* name() const override { return "host"; }
  const std::string& backend() const override { return backend_; }
  const Capabilities& capabilities() const override { return caps_; }

  int device_count() const override { return device_count_; }
  std::string device_name(int device) const override;
  void mem_get_info(int device, size_t* free, size_t* total) override;
  void set_device(int /*device*/) override {}

  void* malloc(int device, size_t bytes) override;
  void free(int device, void* ptr) override;
  void* malloc_host(size_t bytes) override;
  void free_host(void* ptr) override;

  StreamHandle stream_create(int device, int priority) override;
  void stream_synchronize(int device, StreamHandle stream) override;
  bool stream_query(int device, StreamHandle stream) override;
  void stream_wait_event(int device, StreamHandle stream,
                         EventHandle event) override;
  void device_synchronize(int device) override;
  bool device_synchronize_if_done(int device) override;
  void launch_host_func(int device, StreamHandle stream,
                        std::function<void()> fn, const char* label) override;

  EventHandle event_create(int device, bool timing, bool blocking) override;
  void event_destroy(int device, EventHandle event) override;
  void event_record(int device, EventHandle event,
                    StreamHandle stream) override;
  bool event_query(int device, EventHandle event) override;
  void event_synchronize(int device, EventHandle event) override;
  void event_wait(int device, EventHandle event) override;
  float event_elapsed_ms(int device, EventHandle start,
                         EventHandle end) override;

  void memcpy_async(int device, void* dst, const void* src, size_t bytes,
                    MemcpyKind kind, StreamHandle stream) override;

  // Graph capture: defined in host_graph.cpp.
  void stream_begin_capture(int device, StreamHandle stream,
                            CaptureMode mode) override;
  GraphHandle stream_end_capture(int device, StreamHandle stream) override;
  uint64_t stream_capture_id(int device, StreamHandle stream) override;
  void graph_launch(int device, GraphHandle graph,
                    StreamHandle stream) override;
  void graph_destroy(int device, GraphHandle graph) override;
  std::string graph_describe(int device, GraphHandle graph) override;

  OpKernels& kernels() override;
  bool enqueue_delay(int device, StreamHandle stream, double ms) override;
  uint64_t calls_run_at_once(int device, StreamHandle stream) override;
  int kernel_threads() const override;

  // The queue behind a handle (nullptr is the device's default stream).
  HostStream& stream(int device, StreamHandle handle);
  // The device's default stream and every stream created on it.
  c10::SmallVector<HostStream*, 16> device_streams(int device);

 private:
  struct Device {
    size_t total_bytes = 0;
    std::atomic<size_t> used_bytes{0};
    std::once_flag default_stream_once;
    std::unique_ptr<HostStream> default_stream;
    // default_stream.get() once made: read without std::call_once, whose
    // thread-local bookkeeping cost every synchronize about 80 instructions.
    std::atomic<HostStream*> default_stream_made{nullptr};
    std::mutex streams_mutex;
    std::vector<std::unique_ptr<HostStream>> streams;
    // streams.size(), published after each creation: a device that never
    // created a stream (most programs) is synchronized without the lock.
    std::atomic<size_t> stream_count{0};
  };

  // Waits for the work queued on `device` so far and reports its errors;
  // with `may_block` false, returns false (having done nothing) where that
  // would wait.
  bool synchronize_device(int device, bool may_block);

  Device& dev(int device);
  HostEvent& event(EventHandle handle);
  // The event behind a handle, shared: graph nodes keep what they record.
  std::shared_ptr<HostEvent> shared_event(EventHandle handle);

  std::string backend_ = "host";
  Capabilities caps_;
  int device_count_ = 1;
  std::vector<std::unique_ptr<Device>> devices_;

  std::mutex allocations_mutex_;
  std::unordered_map<void*, size_t> allocations_;

  std::mutex events_mutex_;
  std::unordered_map<void*, std::shared_ptr<HostEvent>> events_;

  std::unique_ptr<OpKernels> kernels_;
};

std::unique_ptr<OpKernels> make_host_kernels(HostProvider& provider);

}  // namespace torch_infini::runtime::host
