// DDP's timer for infini parameters. The Reducer asks c10d's TimerRegistry
// for one by the parameters' device type; without one, DDP's runtime
// statistics (forward, backward compute and communication times) stay
// empty and PyTorch warns "Time stats are currently only collected for CPU
// and CUDA devices" at every logged iteration.
//
// Like CUDA's, it records events on the current stream, so a time is when
// the device did the work, not when the host queued it. The statistics are
// read for a sample of iterations only, which is when the events are
// waited for.

#include <c10/core/DeviceGuard.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

#include <optional>

#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"

namespace torch_infini::distributed {
namespace {

class InfiniTimer final : public c10d::Timer {
 public:
  explicit InfiniTimer(c10::Device device) : device_(device) {}

  void record(Event event) override {
    c10d::Timer::record(event);  // the host time too, which DDP also reads
    c10::DeviceGuard guard(device_);
    event_of(event).record(current_stream(device_.index()));
  }

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    c10::Event& first = event_of(start);
    c10::Event& last = event_of(end);
    if (!first.was_marked_for_recording() || !last.was_marked_for_recording()) {
      return std::nullopt;
    }
    try {
      c10::DeviceGuard guard(device_);
      first.synchronize();
      last.synchronize();
      const double ms = first.elapsedTime(last);
      if (ms < 0) {
        return std::nullopt;  // recorded out of order (no backward yet)
      }
      return static_cast<int64_t>(ms * 1e6);
    } catch (const c10::Error&) {
      // A provider without timed events: no figure, rather than failing the
      // training step that logs it.
      return std::nullopt;
    }
  }

 private:
  c10::Event& event_of(Event event) {
    switch (event) {
      case Event::kForwardStart:
        return forward_start_;
      case Event::kBackwardComputeStart:
        return backward_compute_start_;
      case Event::kBackwardComputeEnd:
        return backward_compute_end_;
      case Event::kBackwardCommStart:
        return backward_comm_start_;
      case Event::kBackwardCommEnd:
        return backward_comm_end_;
    }
    TORCH_INTERNAL_ASSERT(false, "unknown DDP timer event");
  }

  c10::Device device_;
  // BACKEND_DEFAULT: events that keep timing (PYTORCH_DEFAULT ones do not).
  c10::Event forward_start_{kInfini, c10::EventFlag::BACKEND_DEFAULT};
  c10::Event backward_compute_start_{kInfini, c10::EventFlag::BACKEND_DEFAULT};
  c10::Event backward_compute_end_{kInfini, c10::EventFlag::BACKEND_DEFAULT};
  c10::Event backward_comm_start_{kInfini, c10::EventFlag::BACKEND_DEFAULT};
  c10::Event backward_comm_end_{kInfini, c10::EventFlag::BACKEND_DEFAULT};
};

}  // namespace
}  // namespace torch_infini::distributed

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1,
                         torch_infini::distributed::InfiniTimer);
}  // namespace c10d
