#include "runtime/device_trace.h"

#include <c10/util/ApproximateClock.h>
#include <c10/util/SmallVector.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <utility>

namespace torch_infini::profiler {
namespace detail {
std::atomic<bool> g_tracing{false};
}  // namespace detail

namespace {

// The correlation ids of the operators this thread is inside (innermost
// last), while a Kineto session runs.
// Each id is kept with the collection it belongs to: a collection that ends
// inside an operator leaves its id behind, which a later one ignores.
struct Correlation {
  uint64_t generation;
  uint64_t id;
};
thread_local c10::SmallVector<Correlation, 8> tls_correlation;
std::atomic<uint64_t> g_generation{0};

uint64_t current_correlation() {
  while (!tls_correlation.empty() &&
         tls_correlation.back().generation !=
             g_generation.load(std::memory_order_relaxed)) {
    tls_correlation.pop_back();
  }
  return tls_correlation.empty() ? 0 : tls_correlation.back().id;
}

uint64_t this_thread_id() {
  thread_local const uint64_t id = static_cast<uint64_t>(syscall(SYS_gettid));
  return id;
}

// The records of one collection, and the traced work still in flight. Each
// collection has a generation, so work queued during an earlier one that ends
// during a later one is dropped rather than misplaced.
struct Store {
  std::mutex mutex;
  std::condition_variable drained;
  std::vector<DeviceRecord> records;
  uint64_t generation = 0;
  int64_t in_flight = 0;
};

Store& store() {
  static Store* s = new Store();  // leaked: workers may finish after exit
  return *s;
}

void add(DeviceRecord record, uint64_t generation) {
  Store& s = store();
  std::lock_guard<std::mutex> guard(s.mutex);
  if (generation == s.generation) {
    s.records.push_back(std::move(record));
  }
}

}  // namespace

int64_t now_ns() {
  return c10::getTime();  // CLOCK_REALTIME, as PyTorch's profiler converts to
}

namespace {

// The record of one traced task, added when the task is destroyed: the host
// runtime destroys a task right after running it, before it reports the task
// complete, so a synchronize that returns has seen its record. A task dropped
// without running leaves no record but is no longer waited for.
struct Pending {
  DeviceRecord record;
  uint64_t generation = 0;
  bool ran = false;
  Pending() = default;
  Pending(const Pending&) = delete;
  Pending& operator=(const Pending&) = delete;
  ~Pending() {
    Store& s = store();
    std::lock_guard<std::mutex> guard(s.mutex);
    if (ran && generation == s.generation) {
      s.records.push_back(std::move(record));
    }
    if (--s.in_flight == 0) {
      s.drained.notify_all();
    }
  }
};

}  // namespace

std::function<void()> traced(const Label& label, std::function<void()> task) {
  auto pending = std::make_shared<Pending>();
  DeviceRecord& record = pending->record;
  record.name = label.name;
  record.overload = label.overload;
  record.kind = label.kind;
  record.device = label.device;
  record.stream = label.stream;
  record.enqueue_ns = now_ns();
  record.correlation_id = current_correlation();
  record.enqueue_thread = this_thread_id();
  {
    Store& s = store();
    std::lock_guard<std::mutex> guard(s.mutex);
    pending->generation = s.generation;
    ++s.in_flight;
  }
  return [task = std::move(task), pending = std::move(pending)] {
    // Timed however the task ends: a failing kernel still ran.
    struct Finish {
      Pending& pending;
      ~Finish() {
        pending.record.end_ns = now_ns();
        pending.ran = true;
      }
    };
    pending->record.start_ns = now_ns();
    Finish finish{*pending};
    task();
  };
}

void record_direct(const char* name, const char* overload, int device,
                   const void* stream, int64_t start_ns) {
  DeviceRecord record;
  record.name = name;
  record.overload = overload;
  record.device = device;
  record.stream = stream;
  record.enqueue_ns = start_ns;
  record.start_ns = start_ns;
  record.end_ns = now_ns();
  record.correlation_id = current_correlation();
  record.enqueue_thread = this_thread_id();
  record.direct = true;
  uint64_t generation = 0;
  {
    Store& s = store();
    std::lock_guard<std::mutex> guard(s.mutex);
    generation = s.generation;
  }
  add(std::move(record), generation);
}

void start() {
  Store& s = store();
  {
    std::lock_guard<std::mutex> guard(s.mutex);
    ++s.generation;
    g_generation.store(s.generation, std::memory_order_relaxed);
    s.records.clear();
  }
  detail::g_tracing.store(true, std::memory_order_relaxed);
}

void stop() {
  detail::g_tracing.store(false, std::memory_order_relaxed);
  // Traced work queued before the stop is part of the profiled region (the
  // region's synchronize may not have come yet): wait for it, bounded so that
  // a stream blocked for long cannot hang the profiler's exit.
  Store& s = store();
  std::unique_lock<std::mutex> lock(s.mutex);
  s.drained.wait_for(lock, std::chrono::seconds(30),
                     [&] { return s.in_flight <= 0; });
}

std::vector<DeviceRecord> take() {
  Store& s = store();
  std::lock_guard<std::mutex> guard(s.mutex);
  std::vector<DeviceRecord> out = std::move(s.records);
  s.records.clear();
  return out;
}

void push_correlation(uint64_t id) {
  tls_correlation.push_back({g_generation.load(std::memory_order_relaxed), id});
}

void pop_correlation() {
  if (!tls_correlation.empty()) {
    tls_correlation.pop_back();
  }
}

const char* kind_name(WorkKind kind) {
  switch (kind) {
    case WorkKind::kKernel:
      return "kernel";
    case WorkKind::kMemcpyHtoD:
      return "memcpy HtoD";
    case WorkKind::kMemcpyDtoH:
      return "memcpy DtoH";
    case WorkKind::kMemcpyDtoD:
      return "memcpy DtoD";
    case WorkKind::kMemset:
      return "memset";
  }
  return "kernel";
}

}  // namespace torch_infini::profiler
