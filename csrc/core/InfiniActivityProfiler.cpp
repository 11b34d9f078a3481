// Kineto's PrivateUse1 activity profiler for infini: what lets
// torch.profiler.profile(activities=[CPU, PrivateUse1]) see device work.
//
// Kineto runs child activity profilers next to its own: it configures,
// starts and stops a session of each with every trace. PyTorch 2.13's
// PrivateUse1ProfilerRegistry (torch/csrc/profiler/standalone/
// privateuse1_profiler.h) forwards a factory to libkineto::api()
// .registerProfilerFactory; we call that directly, because the registry's
// header includes Kineto's headers by bare name (it needs torch/include/kineto
// on the include path, which would change every translation unit's command
// line) and is empty unless USE_KINETO is defined. Our session turns on device tracing (runtime/device_trace.h), keeps
// the correlation id of the operator each thread is inside (Kineto pushes and
// pops them as operators enter and leave), and at the end hands Kineto one
// activity per kernel and copy the streams ran, linked to the operator that
// queued it: a device lane per stream in the chrome trace, and device time
// per operator in key_averages().

#include <kineto/libkineto.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/InfiniStream.h"
#include "core/TorchVersion.h"
#include "runtime/device_trace.h"
#include "runtime/runtime.h"

namespace torch_infini::profiler {
namespace {

// A trace lane of `device`. The Kineto of PyTorch 2.11 and 2.12 constructs
// ResourceInfo from (deviceId, id, sortIndex, name); 2.13's is an aggregate
// of (id, sortIndex, deviceId, name). The same braces compile with both and
// mean other fields, so each gets its order.
libkineto::ResourceInfo resource_info(int64_t device, int64_t id,
                                      int64_t sort_index, std::string name) {
#if TORCH_INFINI_TORCH_AT_LEAST(2, 13)
  return libkineto::ResourceInfo{id, sort_index, device, std::move(name)};
#else
  return libkineto::ResourceInfo{device, id, sort_index, std::move(name)};
#endif
}

using libkineto::ActivityType;

// The kernel's name in the trace: not the operator's own name, which would
// merge the kernel's row with the operator's in key_averages().
std::string kernel_name(const DeviceRecord& r) {
  if (r.kind != WorkKind::kKernel) {
    return r.name;  // "Memcpy HtoD (infini)", ...
  }
  std::string name = "infini::host_kernel<";
  name += r.name;
  if (r.overload != nullptr && *r.overload != '\0') {
    name += '.';
    name += r.overload;
  }
  name += '>';
  return name;
}

ActivityType activity_type(WorkKind kind) {
  switch (kind) {
    case WorkKind::kKernel:
      return ActivityType::CONCURRENT_KERNEL;
    case WorkKind::kMemset:
      return ActivityType::GPU_MEMSET;
    default:
      return ActivityType::GPU_MEMCPY;
  }
}

// Device work is timed on the host runtime's workers only (docs/profiling.md).
void warn_unless_host() {
  const char* name = "host";
  try {
    name = runtime::provider().name();
  } catch (const std::exception&) {
    return;  // no usable device (a forked child): nothing will be queued
  }
  if (std::string(name) != "host") {
    TORCH_WARN_ONCE(
        "infini profiler: device kernels are timed on the host runtime only; "
        "on the Infini stack (provider '", name, "') this profile has no "
        "device lane. For device time per operator use "
        "torch.autograd.profiler.profile(use_device='infini').");
  }
}

class InfiniSession final : public libkineto::IActivityProfilerSession {
 public:
  explicit InfiniSession(bool launches) : launches_(launches) {}

  void start() override {
    warn_unless_host();
    profiler::start();
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    profiler::stop();
    records_ = profiler::take();
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return {}; }

  void processTrace(libkineto::ActivityLogger& logger) override {
    processTrace(logger, nullptr, 0, 0);
  }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback linked,
                    int64_t start_time, int64_t end_time) override {
    buffer_ = std::make_unique<libkineto::CpuTraceBuffer>();
    buffer_->span = libkineto::TraceSpan(start_time, end_time, "infini");
    buffer_->gpuOpCount = static_cast<int>(records_.size());
    const int64_t pid = libkineto::processId();
    int32_t flow = 0;
    for (const DeviceRecord& r : records_) {
      const int64_t lane = lane_of(r);
      const libkineto::ITraceActivity* op = nullptr;
      if (linked && r.correlation_id != 0) {
        op = linked(static_cast<int32_t>(r.correlation_id));
      }
      ++flow;
      const bool launch = launches_ && !r.direct;
      buffer_->emplace_activity(buffer_->span, activity_type(r.kind),
                                kernel_name(r));
      auto& act = *buffer_->activities.back();
      act.device = r.device;
      act.resource = static_cast<int32_t>(lane);
      act.threadId = static_cast<int32_t>(lane);
      act.startTime = r.start_ns;
      act.endTime = r.end_ns;
      act.id = static_cast<int32_t>(r.correlation_id);
      act.linked = op;
      // Quoted: the unquoted form formats with fmt, which libtorch does not
      // export.
      act.addMetadataQuoted("device", std::to_string(r.device));
      act.addMetadataQuoted("stream", std::to_string(lane));
      act.addMetadataQuoted("correlation", std::to_string(r.correlation_id));
      act.addMetadataQuoted("queued (us before it ran)",
                            std::to_string((r.start_ns - r.enqueue_ns) / 1000));
      if (r.direct) {
        act.addMetadataQuoted("ran", "on the calling thread (first call)");
      }
      if (launch) {
        act.flow.id = flow;
        act.flow.type = libkineto::kLinkAsyncCpuGpu;
        act.flow.start = 0;
      }
      act.log(logger);
      if (launch) {
        // The queueing on the calling thread, as CUDA's cudaLaunchKernel:
        // the trace viewer draws an arrow from it to the kernel.
        buffer_->emplace_activity(buffer_->span,
                                  ActivityType::PRIVATEUSE1_RUNTIME,
                                  "infiniLaunchKernel");
        auto& queued = *buffer_->activities.back();
        queued.device = static_cast<int32_t>(pid);
        queued.resource = static_cast<int32_t>(r.enqueue_thread);
        queued.threadId = static_cast<int32_t>(r.enqueue_thread);
        queued.startTime = r.enqueue_ns;
        queued.endTime = r.enqueue_ns + 1;  // a point in time
        queued.id = static_cast<int32_t>(r.correlation_id);
        queued.linked = op;
        queued.flow.id = flow;
        queued.flow.type = libkineto::kLinkAsyncCpuGpu;
        queued.flow.start = 1;
        queued.addMetadataQuoted("correlation",
                                 std::to_string(r.correlation_id));
        queued.log(logger);
      }
    }
    status_ = libkineto::TraceStatus::READY;
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    // One process row per session in Kineto's model: device 0's. Further
    // devices' lanes still show, under their device index.
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{
        0, /*sortIndex=*/1 << 20, "infini", "infini 0"});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> infos;
    for (const auto& [key, lane] : lanes_) {
      infos.push_back(resource_info(key.first, lane, lane,
                                    "stream " + std::to_string(lane)));
    }
    return infos;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { push_correlation(id); }
  void popCorrelationId() override { pop_correlation(); }

 private:
  // A stream's lane: its torch stream id (what torch.infini.Stream.stream_id
  // reports), or a number past those if the stream is not a pool stream.
  int64_t lane_of(const DeviceRecord& r) {
    const auto key = std::make_pair(r.device, r.stream);
    auto it = lanes_.find(key);
    if (it != lanes_.end()) {
      return it->second;
    }
    int64_t lane = stream_id_of_handle(
        static_cast<c10::DeviceIndex>(r.device),
        const_cast<void*>(r.stream));
    if (lane < 0) {
      lane = 1000 + static_cast<int64_t>(lanes_.size());
    }
    lanes_.emplace(key, lane);
    return lane;
  }

  const bool launches_;
  std::vector<DeviceRecord> records_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  std::map<std::pair<int, const void*>, int64_t> lanes_;
};

class InfiniActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override {
    return activities_;
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& activity_types,
      const libkineto::Config& /*config*/) override {
    // PyTorch asks for these with ProfilerActivity.PrivateUse1 (and only
    // then): a CPU-only profile stays without device tracing.
    const bool kernels = activity_types.count(ActivityType::CONCURRENT_KERNEL) ||
        activity_types.count(ActivityType::GPU_MEMCPY);
    if (!kernels) {
      return nullptr;
    }
    return std::make_unique<InfiniSession>(
        activity_types.count(ActivityType::PRIVATEUSE1_RUNTIME) > 0);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/,
      const std::set<ActivityType>& activity_types,
      const libkineto::Config& config) override {
    return configure(activity_types, config);
  }

 private:
  const std::string name_ = "infini";
  const std::set<ActivityType> activities_ = {
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY,
      ActivityType::GPU_MEMSET, ActivityType::PRIVATEUSE1_RUNTIME};
};

struct Register {
  Register() {
    // Kept until Kineto initializes (the first profile), then instantiated.
    libkineto::api().registerProfilerFactory(
        []() -> std::unique_ptr<libkineto::IActivityProfiler> {
          return std::make_unique<InfiniActivityProfiler>();
        });
  }
};

const Register register_profiler;

}  // namespace
}  // namespace torch_infini::profiler
