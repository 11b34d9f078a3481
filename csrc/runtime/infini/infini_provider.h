#pragma once

// The Infini stack provider: InfiniRT for devices, memory, streams, events and
// copies; InfiniOps for kernels. The only place (with infini_kernels.cpp)
// that includes InfiniRT or InfiniOps headers.

#include <infini/rt.h>

#include <memory>
#include <string>

#include "runtime/runtime.h"

namespace torch_infini::runtime::infini {

class InfiniProvider final : public Provider {
 public:
  // Picks the InfiniRT backend: TORCH_INFINI_RT_BACKEND if set, else the
  // first compiled-in accelerator backend with a device, else CPU.
  InfiniProvider();

  const char* name() const override { return "infini"; }
  const std::string& backend() const override { return backend_; }
  const Capabilities& capabilities() const override { return caps_; }

  int device_count() const override { return device_count_; }
  std::string device_name(int device) const override;
  void mem_get_info(int device, size_t* free, size_t* total) override;
  void set_device(int device) override;

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

  EventHandle event_create(int device, bool timing, bool blocking) override;
  void event_destroy(int device, EventHandle event) override;
  void event_record(int device, EventHandle event,
                    StreamHandle stream) override;
  bool event_query(int device, EventHandle event) override;
  void event_synchronize(int device, EventHandle event) override;
  float event_elapsed_ms(int device, EventHandle start,
                         EventHandle end) override;

  void memcpy_async(int device, void* dst, const void* src, size_t bytes,
                    MemcpyKind kind, StreamHandle stream) override;

  // InfiniRT's stream capture (infini_graph.cpp).
  void stream_begin_capture(int device, StreamHandle stream,
                            CaptureMode mode) override;
  GraphHandle stream_end_capture(int device, StreamHandle stream) override;
  uint64_t stream_capture_id(int device, StreamHandle stream) override;
  void graph_launch(int device, GraphHandle graph,
                    StreamHandle stream) override;
  void graph_destroy(int device, GraphHandle graph) override;

  OpKernels& kernels() override;
  bool enqueue_delay(int, StreamHandle, double) override { return false; }

  // Applies this provider's InfiniRT backend (a thread-local choice in
  // InfiniRT) and `device` to the calling thread. Every runtime and kernel
  // call goes through it, so allocator deleters and threads PyTorch starts
  // get the right backend too.
  void bind(int device);
  ::infini::rt::Device::Type device_type() const { return type_; }

 private:
  void bind_backend();
  void probe_capabilities();

  ::infini::rt::Device::Type type_ = ::infini::rt::Device::Type::kCpu;
  std::string backend_;
  Capabilities caps_;
  int device_count_ = 0;
  std::unique_ptr<OpKernels> kernels_;
};

std::unique_ptr<OpKernels> make_infini_kernels(InfiniProvider& provider);

// Whether InfiniRT's graph API (StreamBeginCapture, StreamEndCapture,
// GraphInstantiate, GraphLaunch) is in this build and implemented by
// `backend` (infini_graph.cpp).
bool graphs_available(::infini::rt::Device::Type backend);

}  // namespace torch_infini::runtime::infini
