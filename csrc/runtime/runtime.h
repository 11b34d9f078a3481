#pragma once

// The runtime interface: "what the device can do". core/ and ops/ talk only to
// this header; each provider (runtime/host, runtime/infini) implements it.
// Calls are CUDA-runtime shaped: device memory, streams, events, copies, plus
// a capability record so callers never have to guess what a backend can do.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace torch_infini::runtime {

using StreamHandle = void*;
using EventHandle = void*;
using GraphHandle = void*;

class OpKernels;

enum class MemcpyKind { kHostToDevice, kDeviceToHost, kDeviceToDevice };

// cudaStreamCaptureMode: which calls made while a capture is underway raise.
// Calls that would wait for captured work (synchronizing or querying the
// capturing stream, an event recorded in the capture, the whole device)
// always do; kGlobal also refuses stream and event synchronization from any
// thread, kThreadLocal only from the capturing thread, kRelaxed never.
enum class CaptureMode { kGlobal, kThreadLocal, kRelaxed };

// What the selected provider and backend can do. Probed once, never guessed.
struct Capabilities {
  // MemcpyAsync returns before the copy has finished.
  bool async_copy = false;
  // MallocHost returns memory that asynchronous copies may read and write.
  bool pinned_memory = false;
  // Elapsed time between two events measures the work queued between them.
  bool timed_events = false;
  // Streams and events can report "not ready" (work really runs later).
  bool async_execution = false;
  // Event synchronization sleeps instead of spinning.
  bool blocking_events = false;
  // Stream capture into replayable graphs.
  bool graphs = false;
  // Device pointers are host pointers the host may read and write directly
  // (once the streams' work on them is done), as the built-in runtime's are:
  // host-side engines (gloo for torch.distributed) may then work in place.
  bool host_addressable = false;
  // Device memory is reachable only inside the runtime's own work (the host
  // runtime's TORCH_INFINI_PROTECT_DEVICE_MEMORY=1): kernels and host
  // functions on its streams may address it, other threads (a collective
  // library's) may not, and must copy through host buffers.
  bool protected_memory = false;
  // launch_host_func queues host functions on streams.
  bool host_funcs = false;
  // Kernels compute on the host's cores, with the OpenMP team of the thread
  // that runs them (the host runtime's stream workers and waiting callers,
  // InfiniRT's CPU backend's calling thread): the process's intra-op thread
  // policy applies to them (docs/host-runtime.md, "Intra-op threads"), and
  // torch_infini/_autograd.py then runs infini's backward on the calling
  // thread, whose team CPU eager uses too, rather than on PyTorch's device
  // thread, whose second team would throttle every team's spinning.
  bool host_kernels = false;
};

class Provider {
 public:
  virtual ~Provider() = default;

  // "host" or "infini": the runtime provider serving the device.
  virtual const char* name() const = 0;
  // The backend under the provider: "host" for the built-in runtime, the
  // InfiniRT backend name ("cpu", "nvidia", ...) for the Infini stack.
  virtual const std::string& backend() const = 0;
  // Why backend() was chosen over the others compiled in (each passed-over
  // backend and what its probe answered), for the diagnostics; empty where
  // there was no choice.
  virtual std::string selection_detail() const { return {}; }
  virtual const Capabilities& capabilities() const = 0;

  virtual int device_count() const = 0;
  virtual std::string device_name(int device) const = 0;
  virtual void mem_get_info(int device, size_t* free, size_t* total) = 0;
  // Makes `device` current for runtime calls made by this thread. Providers
  // whose native selection is thread-local re-apply it here.
  virtual void set_device(int device) = 0;

  // Device memory. malloc returns nullptr when the device is out of memory.
  virtual void* malloc(int device, size_t bytes) = 0;
  virtual void free(int device, void* ptr) = 0;
  // Page-locked host memory (only meaningful when capabilities().pinned_memory).
  virtual void* malloc_host(size_t bytes) = 0;
  virtual void free_host(void* ptr) = 0;

  // Streams. The handle of a device's default stream is nullptr.
  virtual StreamHandle stream_create(int device, int priority) = 0;
  virtual void stream_synchronize(int device, StreamHandle stream) = 0;
  virtual bool stream_query(int device, StreamHandle stream) = 0;
  virtual void stream_wait_event(int device, StreamHandle stream,
                                 EventHandle event) = 0;
  virtual void device_synchronize(int device) = 0;
  // device_synchronize(device) where it cannot block: when nothing queued
  // on the device is still pending, does what device_synchronize does
  // (errors included) and returns true; otherwise does nothing and returns
  // false. A caller holding a lock that queued work may need (Python's GIL)
  // releases it only when there is something to wait for: in a loop of
  // small synchronous ops, the release and re-acquisition were most of a
  // synchronize's cost.
  virtual bool device_synchronize_if_done(int /*device*/) { return false; }
  // Queues `fn` on `stream` (capabilities().host_funcs): it runs on a host
  // thread after the stream's earlier work and before its later work, as
  // cudaLaunchHostFunc's function does; under a capture it is recorded. A
  // compiled graph's generated C++ kernels run this way, over device memory
  // the host addresses. What `fn` throws becomes the stream's pending error.
  // `label` (which must outlive the work) names it on a profiler's device
  // timeline. The default refuses, naming the provider.
  virtual void launch_host_func(int device, StreamHandle stream,
                                std::function<void()> fn, const char* label);

  // Events.
  virtual EventHandle event_create(int device, bool timing, bool blocking) = 0;
  virtual void event_destroy(int device, EventHandle event) = 0;
  virtual void event_record(int device, EventHandle event,
                            StreamHandle stream) = 0;
  virtual bool event_query(int device, EventHandle event) = 0;
  virtual void event_synchronize(int device, EventHandle event) = 0;
  // Blocks until `event` completes without reporting asynchronous errors of
  // the work before it: the allocators wait this way, so that a pending
  // error reaches the user's next synchronizing call instead of breaking an
  // unrelated allocation or empty_cache.
  virtual void event_wait(int device, EventHandle event) {
    event_synchronize(device, event);
  }
  virtual float event_elapsed_ms(int device, EventHandle start,
                                 EventHandle end) = 0;

  // Copies ordered on `stream`. Where the backend has no asynchronous copy
  // this completes before returning (and after the stream's earlier work).
  virtual void memcpy_async(int device, void* dst, const void* src,
                            size_t bytes, MemcpyKind kind,
                            StreamHandle stream) = 0;

  // Graphs (capabilities().graphs), shaped like CUDA's stream capture:
  // between begin and end, the work queued on `stream` (and on streams that
  // join the capture by waiting on an event recorded in it) is recorded
  // instead of run. The defaults refuse, naming the provider and backend.
  virtual void stream_begin_capture(int device, StreamHandle stream,
                                    CaptureMode mode);
  // Ends the capture begun on `stream` and returns the graph, ready to
  // launch. Raises (and ends the capture) if it was invalidated.
  virtual GraphHandle stream_end_capture(int device, StreamHandle stream);
  // The id of the capture `stream` records into (it began or joined it),
  // 0 when it is not capturing (cudaStreamGetCaptureInfo's id).
  virtual uint64_t stream_capture_id(int device, StreamHandle stream);
  // Queues the graph's work on `stream`, in capture order.
  virtual void graph_launch(int device, GraphHandle graph,
                            StreamHandle stream);
  // Frees the graph; work already launched still runs.
  virtual void graph_destroy(int device, GraphHandle graph);
  // What the graph holds, one node a line (debug_dump); empty if unknown.
  virtual std::string graph_describe(int /*device*/, GraphHandle /*graph*/) {
    return {};
  }

  // The kernels this provider runs (see runtime/kernels.h).
  virtual OpKernels& kernels() = 0;

  // Intra-op threads of the CPU kernels a stream worker runs, on providers
  // whose kernels are CPU kernels (0 elsewhere). Tests that compare with CPU
  // bit for bit run CPU on as many: a reduction split alike rounds alike.
  virtual int kernel_threads() const { return 0; }

  // Test hook: queues a wait of `ms` milliseconds on `stream`, so tests can
  // hold a queue busy deterministically. Returns false where the backend
  // cannot queue host work (the Infini stack).
  virtual bool enqueue_delay(int device, StreamHandle stream, double ms) = 0;

  // Test hook: how many calls queued on `stream` ran at once on the calling
  // thread instead (runtime/host/host_stream.h, HostStream::run_now); 0
  // where the provider never does that.
  virtual uint64_t calls_run_at_once(int /*device*/, StreamHandle /*stream*/) {
    return 0;
  }
};

// The provider selected for this process (selected on first use). Raises in
// a child process forked after the runtime started.
Provider& provider();

// Whether this process was forked after the runtime started (it must not
// use the device; memory inherited from the parent is left alone).
bool in_bad_fork();

// Which providers this build can serve ("host" always, "infini" when the
// Infini stack is compiled in).
bool infini_stack_compiled();

}  // namespace torch_infini::runtime
