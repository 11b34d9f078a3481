#include "runtime/host/host_provider.h"

#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "runtime/device_trace.h"
#include "runtime/env.h"
#include "runtime/host/host_graph.h"
#include "runtime/host/memory_protection.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::host {
namespace {

constexpr size_t kAlignment = 64;
constexpr int kMaxHostDevices = 16;

// Device blocks are 64-byte aligned and never zero-sized, like cudaMalloc's.
size_t round_up(size_t bytes) {
  return bytes == 0 ? kAlignment
                    : (bytes + kAlignment - 1) / kAlignment * kAlignment;
}

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0
      ? static_cast<size_t>(pages) * static_cast<size_t>(page_size)
      : size_t{16} << 30;
}

// Rethrows a worker's error as a PyTorch error the user can read.
template <typename F>
auto checked(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const c10::Error&) {
    throw;
  } catch (const std::exception& e) {
    TORCH_CHECK(false, e.what());
  }
}

}  // namespace

HostProvider::HostProvider() {
  device_count_ = static_cast<int>(env_int(
      "TORCH_INFINI_HOST_DEVICES", 1, 1, kMaxHostDevices));
  const size_t total = env_bytes("TORCH_INFINI_HOST_MEMORY",
                                 physical_memory_bytes());
  devices_.reserve(device_count_);
  for (int i = 0; i < device_count_; ++i) {
    devices_.push_back(std::make_unique<Device>());
    devices_.back()->total_bytes = total;
  }
  caps_.async_copy = true;
  caps_.pinned_memory = true;
  caps_.timed_events = true;
  caps_.async_execution = true;
  caps_.blocking_events = true;
  caps_.graphs = true;  // runtime/host/host_graph.h
  caps_.host_addressable = true;
  caps_.protected_memory = memory_protection_on();
  caps_.host_funcs = true;
  caps_.host_kernels = true;  // ATen's CPU kernels, on workers and callers
  kernels_ = make_host_kernels(*this);
}

HostProvider::Device& HostProvider::dev(int device) {
  TORCH_CHECK(device >= 0 && device < device_count_,
              "infini host runtime: invalid device index ", device,
              " (device count is ", device_count_, ")");
  return *devices_[device];
}

std::string HostProvider::device_name(int device) const {
  TORCH_CHECK(device >= 0 && device < device_count_,
              "invalid device index ", device);
  return "Infini host runtime device " + std::to_string(device);
}

void HostProvider::mem_get_info(int device, size_t* free, size_t* total) {
  Device& d = dev(device);
  const size_t used = d.used_bytes.load();
  *total = d.total_bytes;
  *free = used >= d.total_bytes ? 0 : d.total_bytes - used;
}

void* HostProvider::malloc(int device, size_t bytes) {
  Device& d = dev(device);
  const size_t rounded = round_up(bytes);
  // Reserve against the configured device size first, so OOM is exact even
  // with several threads allocating.
  size_t used = d.used_bytes.load();
  do {
    if (rounded > d.total_bytes || used > d.total_bytes - rounded) {
      return nullptr;
    }
  } while (!d.used_bytes.compare_exchange_weak(used, used + rounded));
  void* ptr = memory_protection_on() ? protected_malloc(rounded)
                                     : std::aligned_alloc(kAlignment, rounded);
  if (ptr == nullptr) {
    d.used_bytes -= rounded;
    return nullptr;
  }
  std::lock_guard<std::mutex> guard(allocations_mutex_);
  allocations_.emplace(ptr, rounded);
  return ptr;
}

void HostProvider::free(int device, void* ptr) {
  if (ptr == nullptr) {
    return;
  }
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> guard(allocations_mutex_);
    auto it = allocations_.find(ptr);
    TORCH_CHECK(it != allocations_.end(),
                "infini host runtime: free of a pointer it did not allocate");
    bytes = it->second;
    allocations_.erase(it);
  }
  dev(device).used_bytes -= bytes;
  if (memory_protection_on()) {
    protected_free(ptr, bytes);
  } else {
    std::free(ptr);
  }
}

void* HostProvider::malloc_host(size_t bytes) {
  return std::aligned_alloc(kAlignment, round_up(bytes));
}

void HostProvider::free_host(void* ptr) {
  std::free(ptr);
}

HostStream& HostProvider::stream(int device, StreamHandle handle) {
  if (handle != nullptr) {
    return *static_cast<HostStream*>(handle);
  }
  Device& d = dev(device);
  if (HostStream* made = d.default_stream_made.load(std::memory_order_acquire)) {
    return *made;
  }
  std::call_once(d.default_stream_once, [&] {
    d.default_stream = std::make_unique<HostStream>(device, 0);
    d.default_stream_made.store(d.default_stream.get(),
                                std::memory_order_release);
  });
  return *d.default_stream;
}

StreamHandle HostProvider::stream_create(int device, int priority) {
  Device& d = dev(device);
  auto created = std::make_unique<HostStream>(device, priority);
  HostStream* raw = created.get();
  std::lock_guard<std::mutex> guard(d.streams_mutex);
  d.streams.push_back(std::move(created));
  d.stream_count.store(d.streams.size(), std::memory_order_release);
  return raw;
}

void HostProvider::stream_synchronize(int device, StreamHandle handle) {
  check_stream_sync(stream(device, handle), "Stream.synchronize");
  checked([&] { stream(device, handle).synchronize(); });
}

bool HostProvider::stream_query(int device, StreamHandle handle) {
  check_stream_sync(stream(device, handle), "Stream.query");
  return checked([&] { return stream(device, handle).query(); });
}

void HostProvider::stream_wait_event(int device, StreamHandle handle,
                                     EventHandle ev) {
  if (captures_underway() &&
      capture_event_wait(stream(device, handle), shared_event(ev))) {
    return;
  }
  event(ev).block(stream(device, handle));
}

c10::SmallVector<HostStream*, 16> HostProvider::device_streams(int device) {
  Device& d = dev(device);
  // On the stack: a synchronize per small op must not allocate.
  c10::SmallVector<HostStream*, 16> streams{&stream(device, nullptr)};
  if (d.stream_count.load(std::memory_order_acquire) == 0) {
    return streams;  // a stream made concurrently is not queued "before"
  }
  std::lock_guard<std::mutex> guard(d.streams_mutex);
  for (auto& s : d.streams) {
    streams.push_back(s.get());
  }
  return streams;
}

void HostProvider::device_synchronize(int device) {
  synchronize_device(device, /*may_block=*/true);
}

bool HostProvider::device_synchronize_if_done(int device) {
  return synchronize_device(device, /*may_block=*/false);
}

bool HostProvider::synchronize_device(int device, bool may_block) {
  check_device_sync(device, "synchronize");
  const auto streams = device_streams(device);
  // What "queued so far" means: each stream's last ticket now. Work queued
  // by other threads from here on is not waited for (nor, without
  // may_block, does it turn this call into a wait).
  c10::SmallVector<uint64_t, 16> tickets;
  for (HostStream* s : streams) {
    tickets.push_back(s->submitted());
    if (!may_block && !s->reached(tickets.back())) {
      return false;
    }
  }
  // Wait for every stream first (outside the lock: the workers may be long
  // busy), then report: an error on one stream must not cut the wait for the
  // others short. Every pending error is reported, in one exception, so the
  // next call succeeds. (Reached tickets return at once: wait_for only
  // notes how the program waits, see HostStream::run_now.)
  for (size_t i = 0; i < streams.size(); ++i) {
    streams[i]->wait_for(tickets[i]);
  }
  std::string report;
  size_t failed = 0;
  for (HostStream* s : streams) {
    std::string error = s->take_error();
    if (!error.empty()) {
      report += (failed++ == 0 ? "" : "\n") + error;
    }
  }
  TORCH_CHECK(failed == 0, failed == 1 ? "" : std::to_string(failed) +
                  " streams of device " + std::to_string(device) +
                  " failed:\n",
              report);
  return true;
}

HostEvent& HostProvider::event(EventHandle handle) {
  TORCH_CHECK(handle != nullptr, "infini host runtime: null event");
  return *static_cast<HostEvent*>(handle);
}

std::shared_ptr<HostEvent> HostProvider::shared_event(EventHandle handle) {
  std::lock_guard<std::mutex> guard(events_mutex_);
  auto it = events_.find(handle);
  TORCH_CHECK(it != events_.end(), "infini host runtime: unknown event");
  return it->second;
}

EventHandle HostProvider::event_create(int device, bool timing,
                                       bool /*blocking*/) {
  dev(device);
  auto ev = std::make_shared<HostEvent>(device, timing);
  void* handle = ev.get();
  std::lock_guard<std::mutex> guard(events_mutex_);
  events_.emplace(handle, std::move(ev));
  return handle;
}

void HostProvider::event_destroy(int /*device*/, EventHandle handle) {
  // Queued records and waits hold their own reference: destroying an event
  // with work pending is safe, as it is in CUDA.
  std::shared_ptr<HostEvent> owned;
  std::lock_guard<std::mutex> guard(events_mutex_);
  auto it = events_.find(handle);
  if (it != events_.end()) {
    owned = std::move(it->second);
    events_.erase(it);
  }
}

void HostProvider::event_record(int device, EventHandle ev,
                                StreamHandle handle) {
  if (captures_underway() &&
      capture_event_record(shared_event(ev), stream(device, handle))) {
    return;
  }
  event(ev).record(stream(device, handle));
}

bool HostProvider::event_query(int /*device*/, EventHandle ev) {
  check_event_sync(event(ev), "Event.query", /*blocking=*/false);
  return event(ev).query();
}

void HostProvider::event_synchronize(int /*device*/, EventHandle ev) {
  check_event_sync(event(ev), "Event.synchronize", /*blocking=*/true);
  checked([&] { event(ev).synchronize(); });
}

void HostProvider::event_wait(int /*device*/, EventHandle ev) {
  event(ev).wait();
}

float HostProvider::event_elapsed_ms(int /*device*/, EventHandle start,
                                     EventHandle end) {
  HostEvent& s = event(start);
  HostEvent& e = event(end);
  TORCH_CHECK(s.timing() && e.timing(),
              "elapsed_time needs both events created with enable_timing=True");
  return checked([&] { return e.elapsed_since(s); });
}

void HostProvider::memcpy_async(int device, void* dst, const void* src,
                                size_t bytes, MemcpyKind kind,
                                StreamHandle handle) {
  if (bytes == 0) {
    return;
  }
  profiler::TaskLabel label(
      kind == MemcpyKind::kHostToDevice   ? "Memcpy HtoD (infini)"
          : kind == MemcpyKind::kDeviceToHost ? "Memcpy DtoH (infini)"
                                              : "Memcpy DtoD (infini)",
      kind == MemcpyKind::kHostToDevice   ? profiler::WorkKind::kMemcpyHtoD
          : kind == MemcpyKind::kDeviceToHost ? profiler::WorkKind::kMemcpyDtoH
                                              : profiler::WorkKind::kMemcpyDtoD,
      device, handle);
  stream(device, handle).enqueue(
      [dst, src, bytes] { std::memcpy(dst, src, bytes); });
}

OpKernels& HostProvider::kernels() {
  return *kernels_;
}

void HostProvider::launch_host_func(int device, StreamHandle handle,
                                    std::function<void()> fn,
                                    const char* label) {
  profiler::TaskLabel traced(label, profiler::WorkKind::kKernel, device,
                             handle);
  stream(device, handle).enqueue(std::move(fn));
}

int HostProvider::kernel_threads() const {
  return worker_intra_op_threads();
}

bool HostProvider::enqueue_delay(int device, StreamHandle handle, double ms) {
  stream(device, handle).enqueue([ms] {
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(ms));
  });
  return true;
}

uint64_t HostProvider::calls_run_at_once(int device, StreamHandle handle) {
  return stream(device, handle).ran_now();
}

}  // namespace torch_infini::runtime::host
