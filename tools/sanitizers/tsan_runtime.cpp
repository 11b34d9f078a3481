// ThreadSanitizer harness for the host runtime's own code (runtime/host) and
// the device allocator (core/InfiniAllocator), without Python or ATen
// kernels: built and run by tools/sanitizers/run_tsan.sh (not run in CI).
//
// Threads race on what the Python stress suite races on: allocation and
// free of blocks whose "kernels" (tasks writing the block) are still queued,
// empty_cache from another thread, record_stream across streams, events
// recorded and waited on across streams and threads, device synchronize
// while others submit, full queues (backpressure), and asynchronous errors.
// Every block's contents are checked after its kernels ran.

#include <c10/core/Stream.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

#include "core/InfiniAllocator.h"
#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"
#include "runtime/host/host_provider.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::host {
// The harness runs no ATen kernel: the provider gets no kernel table.
std::unique_ptr<OpKernels> make_host_kernels(HostProvider&) {
  return nullptr;
}
}  // namespace torch_infini::runtime::host

namespace {

using namespace torch_infini;
using runtime::host::HostProvider;
using runtime::host::HostStream;

std::atomic<int> failures{0};

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}

HostProvider& host() {
  return dynamic_cast<HostProvider&>(runtime::provider());
}

HostStream& queue_of(const c10::Stream& s) {
  return host().stream(0, native_stream(s));
}

// A "kernel": fills `bytes` at `ptr` with `value` on the stream's worker.
void fill_on(const c10::Stream& s, void* ptr, size_t bytes, unsigned char value) {
  queue_of(s).enqueue([=] { std::memset(ptr, value, bytes); });
}

// Checks, on the stream's worker, that `bytes` at `ptr` all hold `value`.
void expect_on(const c10::Stream& s, const void* ptr, size_t bytes,
               unsigned char value) {
  queue_of(s).enqueue([=] {
    const auto* p = static_cast<const unsigned char*>(ptr);
    for (size_t i = 0; i < bytes; ++i) {
      if (p[i] != value) {
        std::fprintf(stderr, "FAILED: block content %d != %d\n", p[i], value);
        ++failures;
        return;
      }
    }
  });
}

void free_while_queued(int thread, int iterations) {
  const c10::Stream s = stream_from_pool(0, 0);
  set_current_stream(s);
  auto* alloc = allocator::get();
  for (int i = 0; i < iterations; ++i) {
    const size_t bytes = (i % 3 == 0) ? (3u << 20) : 4096;
    const auto value = static_cast<unsigned char>(thread * 31 + i);
    c10::DataPtr a = alloc->allocate(bytes);
    fill_on(s, a.get(), bytes, value);
    expect_on(s, a.get(), bytes, value);
    a.clear();  // freed while its kernels are queued
    c10::DataPtr b = alloc->allocate(bytes);  // maybe the same block: ordered
    fill_on(s, b.get(), bytes, static_cast<unsigned char>(value + 1));
  }
  queue_of(s).synchronize();
}

void cross_stream(int iterations) {
  const c10::Stream mine = stream_from_pool(-1, 0);
  const c10::Stream other = stream_from_pool(0, 0);
  set_current_stream(mine);
  auto* alloc = allocator::get();
  auto& rt = runtime::provider();
  for (int i = 0; i < iterations; ++i) {
    c10::DataPtr a = alloc->allocate(8192);
    fill_on(mine, a.get(), 8192, 7);
    runtime::EventHandle ev = rt.event_create(0, false, false);
    rt.event_record(0, ev, native_stream(mine));
    rt.stream_wait_event(0, native_stream(other), ev);
    if (i % 16 == 0) {
      rt.enqueue_delay(0, native_stream(other), 0.2);
    }
    expect_on(other, a.get(), 8192, 7);
    allocator::record_stream(a, other);
    a.clear();
    c10::DataPtr b = alloc->allocate(8192);  // must not be a's block yet
    fill_on(mine, b.get(), 8192, 9);
    rt.event_destroy(0, ev);
  }
  rt.device_synchronize(0);
}

void empty_cache_loop(std::atomic<bool>& stop) {
  while (!stop.load()) {
    allocator::empty_cache();
    (void)allocator::stats(0);
  }
}

void synchronize_loop(std::atomic<bool>& stop) {
  auto& rt = runtime::provider();
  while (!stop.load()) {
    try {
      rt.device_synchronize(0);
    } catch (const c10::Error&) {
      // errors of the error thread: reported to whoever synchronizes
    }
  }
}

void errors_and_backpressure(int rounds) {
  const c10::Stream s = stream_from_pool(0, 0);
  HostStream& q = queue_of(s);
  for (int r = 0; r < rounds; ++r) {
    q.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(2)); });
    for (size_t i = 0; i < HostStream::kMaxQueueDepth + 64; ++i) {
      q.enqueue([] {});
    }
    q.enqueue([] { throw std::runtime_error("boom"); });
    try {
      q.synchronize();
    } catch (const std::exception&) {
      // this thread or a synchronize_loop thread reports it
    }
  }
}

}  // namespace

int main() {
  std::atomic<bool> stop{false};
  std::vector<std::thread> background;
  background.emplace_back(empty_cache_loop, std::ref(stop));
  background.emplace_back(synchronize_loop, std::ref(stop));
  std::vector<std::thread> workers;
  for (int t = 0; t < 3; ++t) {
    workers.emplace_back(free_while_queued, t, 400);
  }
  workers.emplace_back(cross_stream, 400);
  workers.emplace_back(errors_and_backpressure, 20);
  for (auto& t : workers) {
    t.join();
  }
  stop = true;
  for (auto& t : background) {
    t.join();
  }
  try {
    runtime::provider().device_synchronize(0);
  } catch (const c10::Error&) {
  }
  allocator::empty_cache();
  const auto st = allocator::stats(0);
  const size_t agg = 0;
  check(st.allocated_bytes[agg].current == 0, "allocated bytes back to 0");
  check(st.reserved_bytes[agg].current == 0, "reserved bytes back to 0");
  std::printf("tsan_runtime: %s\n", failures.load() == 0 ? "OK" : "FAILED");
  return failures.load() == 0 ? 0 : 1;
}
