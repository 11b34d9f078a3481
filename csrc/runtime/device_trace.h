#pragma once

// The device timeline a profiler reads: one record per kernel or copy that a
// stream ran while a profiler collected device activity, timed where the work
// really ran (on the host runtime, the stream's worker thread).
//
// It lives beside the runtime that fills it, so that runtime/ can time its
// work without knowing any profiler: the PyTorch integration above it (the
// Kineto activity profiler, core/InfiniActivityProfiler.cpp, and the Python
// helpers) starts and stops collection and reads the records. Nothing
// here costs anything while no profiler is active but the one relaxed
// atomic load of tracing().

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace torch_infini::profiler {

enum class WorkKind : uint8_t {
  kKernel,
  kMemcpyHtoD,
  kMemcpyDtoH,
  kMemcpyDtoD,
  kMemset,
};

// What a task is, set by the code that queues it (see TaskLabel): only
// labelled tasks are traced, so event records and stream waits stay out of
// the timeline, as on CUDA.
struct Label {
  // Both must outlive the task (literals, or an operator's registered name).
  const char* name = nullptr;
  const char* overload = nullptr;  // an operator's overload name, or nullptr
  WorkKind kind = WorkKind::kKernel;
  int device = 0;
  const void* stream = nullptr;  // the provider's handle; nullptr: default
};

// One piece of device work that ran.
struct DeviceRecord {
  const char* name = nullptr;  // as in Label
  const char* overload = nullptr;
  WorkKind kind = WorkKind::kKernel;
  int device = 0;
  const void* stream = nullptr;
  // Nanoseconds since the Unix epoch (the clock of PyTorch's profiler
  // events): when the calling thread queued it, and when it ran.
  int64_t enqueue_ns = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  // The profiler's correlation id of the innermost operator that queued it
  // on the calling thread (0: none), which links it to that operator.
  uint64_t correlation_id = 0;
  uint64_t enqueue_thread = 0;  // system thread id of the calling thread
  bool direct = false;  // ran on the calling thread (first call of a kind)
};

namespace detail {
extern std::atomic<bool> g_tracing;
// The label of the work this thread is queuing (TaskLabel), or nullptr.
inline thread_local const Label* tls_label = nullptr;
}  // namespace detail

// Whether device work is being traced. The only cost on the hot path.
inline bool tracing() {
  return detail::g_tracing.load(std::memory_order_relaxed);
}

// Names the work the current thread queues in this scope (a kernel, a copy).
// Two thread-local stores, written here (every queued call makes one);
// read only while tracing().
class TaskLabel {
 public:
  TaskLabel(const char* name, WorkKind kind, int device, const void* stream,
            const char* overload = nullptr)
      : label_{name, overload, kind, device, stream},
        previous_(detail::tls_label) {
    detail::tls_label = &label_;
  }
  ~TaskLabel() { detail::tls_label = previous_; }
  TaskLabel(const TaskLabel&) = delete;
  TaskLabel& operator=(const TaskLabel&) = delete;

 private:
  Label label_;
  const Label* previous_;
};

// The label of the work being queued on this thread, or nullptr.
inline const Label* current_label() {
  return detail::tls_label;
}

// Wraps `task` (labelled `label`, queued now by this thread) so that it
// times itself where it runs and adds its record. Call only while tracing().
std::function<void()> traced(const Label& label, std::function<void()> task);

// Adds the record of work that ran on the calling thread itself (the direct
// first call of an operator kind), from start_ns to now.
void record_direct(const char* name, const char* overload, int device,
                   const void* stream, int64_t start_ns);

// Now, on the clock of the records.
int64_t now_ns();

// Collection. start() clears the records and begins tracing; stop() ends it
// and waits (bounded) for the traced work already queued to finish, so the
// timeline is complete; take() hands the records over.
void start();
void stop();
std::vector<DeviceRecord> take();

// Correlation with the profiler's operators: the Kineto session pushes and
// pops the id of each operator as it enters and leaves it on its thread.
void push_correlation(uint64_t id);
void pop_correlation();

const char* kind_name(WorkKind kind);

}  // namespace torch_infini::profiler
