// The legacy profiler's device hooks (torch/csrc/profiler/stubs/base.h) for
// infini: torch.autograd.profiler.profile(use_device="infini") records a
// timing event on the current stream as each operator starts and ends, and
// reads the device time of the operator as the time between the two, as it
// does with CUDA events under use_device="cuda" without Kineto's CUPTI.
//
// The events are the provider's (runtime/runtime.h), so this works on every
// provider that has timed events: on the host runtime an event is timed by
// the stream's worker when it reaches it.

#include <c10/core/DeviceGuard.h>
#include <c10/util/ApproximateClock.h>
#include <torch/csrc/profiler/stubs/base.h>

#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"
#include "runtime/runtime.h"

namespace torch_infini::profiler {
namespace {

// A recorded event and the device it belongs to; destroyed with the
// profiler's record of the operator.
struct StubEvent {
  int device = 0;
  runtime::EventHandle handle = nullptr;
  ~StubEvent() {
    if (handle != nullptr) {
      runtime::provider().event_destroy(device, handle);
    }
  }
};

struct InfiniStubs final : torch::profiler::impl::ProfilerStubs {
  void record(c10::DeviceIndex* device,
              torch::profiler::impl::ProfilerVoidEventStub* event,
              int64_t* cpu_ns) const override {
    const c10::DeviceIndex index = current_device();
    if (device != nullptr) {
      *device = index;
    }
    auto stub = std::make_shared<StubEvent>();
    stub->device = index;
    stub->handle = runtime::provider().event_create(index, /*timing=*/true,
                                                    /*blocking=*/false);
    if (cpu_ns != nullptr) {
      *cpu_ns = c10::getTime();
    }
    runtime::provider().event_record(index, stub->handle,
                                     native_stream(current_stream(index)));
    *event = std::move(stub);
  }

  // Microseconds from `event` to `event2`, waiting for both (the profiler
  // reads them after the profiled region).
  float elapsed(
      const torch::profiler::impl::ProfilerVoidEventStub* event,
      const torch::profiler::impl::ProfilerVoidEventStub* event2) const override {
    auto* start = static_cast<StubEvent*>(event->get());
    auto* end = static_cast<StubEvent*>(event2->get());
    TORCH_CHECK(start != nullptr && end != nullptr,
                "infini profiler: an operator's device events are missing");
    auto& provider = runtime::provider();
    provider.event_wait(start->device, start->handle);
    provider.event_wait(end->device, end->handle);
    return provider.event_elapsed_ms(end->device, start->handle, end->handle) *
        1000.0f;
  }

  // Range markers belong to external tracers (NVTX on CUDA); infini has none.
  void mark(const char* /*name*/) const override {}
  void rangePush(const char* /*name*/) const override {}
  void rangePop() const override {}

  bool enabled() const override { return true; }

  void onEachDevice(std::function<void(int)> op) const override {
    const c10::DeviceIndex count = device_count();
    for (c10::DeviceIndex d = 0; d < count; ++d) {
      c10::DeviceGuard guard(c10::Device(kInfini, d));
      op(d);
    }
  }

  void synchronize() const override {
    runtime::provider().device_synchronize(current_device());
  }
};

struct RegisterStubs {
  RegisterStubs() {
    static InfiniStubs stubs;
    torch::profiler::impl::registerPrivateUse1Methods(&stubs);
  }
};

const RegisterStubs register_stubs;

}  // namespace
}  // namespace torch_infini::profiler
