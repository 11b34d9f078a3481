#include "runtime/infini/infini_provider.h"

#include <c10/util/Exception.h>

#include <string_view>
#include <utility>
#include <vector>

#include "runtime/env.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::infini {
namespace {

namespace irt = ::infini::rt;
namespace rt = ::infini::rt::runtime;
using Type = irt::Device::Type;

#define INFINI_RT_CHECK(expr, what)                                        \
  do {                                                                     \
    const auto infini_rt_status_ = (expr);                                 \
    TORCH_CHECK(infini_rt_status_ == rt::kSuccess, "InfiniRT ", what,     \
                " failed with error ", static_cast<int>(infini_rt_status_), \
                " (backend ", backend_, ")");                             \
  } while (0)

// The InfiniRT backends this build was compiled against, accelerators first:
// selection prefers an accelerator with a device, then CPU.
std::vector<Type> compiled_backends() {
  std::vector<Type> types;
#ifdef TORCH_INFINI_RT_HAS_NVIDIA
  types.push_back(Type::kNvidia);
#endif
#ifdef TORCH_INFINI_RT_HAS_ILUVATAR
  types.push_back(Type::kIluvatar);
#endif
#ifdef TORCH_INFINI_RT_HAS_HYGON
  types.push_back(Type::kHygon);
#endif
#ifdef TORCH_INFINI_RT_HAS_METAX
  types.push_back(Type::kMetax);
#endif
#ifdef TORCH_INFINI_RT_HAS_MOORE
  types.push_back(Type::kMoore);
#endif
#ifdef TORCH_INFINI_RT_HAS_CAMBRICON
  types.push_back(Type::kCambricon);
#endif
#ifdef TORCH_INFINI_RT_HAS_ASCEND
  types.push_back(Type::kAscend);
#endif
#ifdef TORCH_INFINI_RT_HAS_CPU
  types.push_back(Type::kCpu);
#endif
  return types;
}

std::string backend_name(Type type) {
  return std::string(irt::Device::StringFromType(type));
}

// Why a backend offers no device, from its GetDeviceCount: the error code,
// named where the backend's runtime is CUDA's (cudaError_t values, which
// InfiniRT's nvidia backend returns unchanged).
std::string no_device_reason(Type type, int status, bool succeeded) {
  if (succeeded) {
    return "no device (GetDeviceCount returned 0)";
  }
  std::string text = "no device (GetDeviceCount failed with error " +
      std::to_string(status);
  if (type == Type::kNvidia) {
    switch (status) {
      case 34:
        text += ", cudaErrorStubLibrary: the CUDA driver found is a stub";
        break;
      case 35:
        text += ", cudaErrorInsufficientDriver: no CUDA driver, or one "
                "older than the CUDA runtime";
        break;
      case 100:
        text += ", cudaErrorNoDevice: the driver sees no GPU";
        break;
      default:
        break;
    }
  }
  return text + ")";
}

// The calling thread's binding: InfiniRT's backend choice is thread-local.
thread_local bool tls_backend_bound = false;
thread_local int tls_device = -1;

rt::MemcpyKind to_rt(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHostToDevice:
      return rt::kMemcpyHostToDevice;
    case MemcpyKind::kDeviceToHost:
      return rt::kMemcpyDeviceToHost;
    case MemcpyKind::kDeviceToDevice:
      return rt::kMemcpyDeviceToDevice;
  }
  return rt::kMemcpyDeviceToDevice;
}

}  // namespace

InfiniProvider::InfiniProvider() {
  const std::vector<Type> compiled = compiled_backends();
  TORCH_CHECK(!compiled.empty(),
              "torch_infini was built against an InfiniRT with no known "
              "backend; rebuild against an InfiniRT install");
  const std::string forced = env_string("TORCH_INFINI_RT_BACKEND", "");
  std::string names;
  for (Type t : compiled) {
    names += (names.empty() ? "" : ", ") + backend_name(t);
  }
  bool chosen = false;
  // What each backend tried and passed over answered: the diagnostics say
  // why a build with an accelerator backend runs on CPU (no driver, no device).
  std::string passed_over;
  for (Type t : compiled) {
    if (!forced.empty() && backend_name(t) != forced) {
      continue;
    }
    irt::set_runtime_device_type(t);
    int count = 0;
    const auto status = rt::GetDeviceCount(&count);
    if (status == rt::kSuccess && count > 0) {
      type_ = t;
      device_count_ = count;
      chosen = true;
      break;
    }
    passed_over += (passed_over.empty() ? "" : "; ") + backend_name(t) + ": " +
        no_device_reason(t, static_cast<int>(status), status == rt::kSuccess);
  }
  TORCH_CHECK(chosen,
              forced.empty()
                  ? std::string("InfiniRT reports no device on any compiled "
                                "backend (") + names + "): " + passed_over
                  : "TORCH_INFINI_RT_BACKEND=" + forced +
                      " is not a compiled-in InfiniRT backend with a device "
                      "(compiled: " + names + ")" +
                      (passed_over.empty() ? "" : ": " + passed_over));
  backend_ = backend_name(type_);
  selection_detail_ = passed_over;
  tls_backend_bound = false;
  tls_device = -1;
  probe_capabilities();
  kernels_ = make_infini_kernels(*this);
}

void InfiniProvider::bind_backend() {
  if (!tls_backend_bound) {
    irt::set_runtime_device_type(type_);
    tls_backend_bound = true;
  }
}

void InfiniProvider::bind(int device) {
  bind_backend();
  if (tls_device != device) {
    TORCH_CHECK(device >= 0 && device < device_count_,
                "InfiniRT: invalid device index ", device, " (", device_count_,
                " device(s) on backend ", backend_, ")");
    INFINI_RT_CHECK(rt::SetDevice(device), "SetDevice");
    tls_device = device;
  }
}

void InfiniProvider::probe_capabilities() {
  // Probed on device 0, once: what the backend really does, not what its
  // name suggests. Failures mean "not supported", never an error.
  bind(0);
  rt::Stream stream = nullptr;
  const bool have_stream = rt::StreamCreate(&stream) == rt::kSuccess;
  void* host = nullptr;
  void* dev = nullptr;
  const bool have_host = rt::MallocHost(&host, 256) == rt::kSuccess && host;
  const bool have_dev = rt::Malloc(&dev, 256) == rt::kSuccess && dev;
  if (have_stream && have_host && have_dev) {
    caps_.async_copy =
        rt::MemcpyAsync(dev, host, 256, rt::kMemcpyHostToDevice, stream) ==
        rt::kSuccess;
    if (caps_.async_copy) {
      rt::StreamSynchronize(stream);
    }
  }
  caps_.pinned_memory = have_host && caps_.async_copy;
  rt::Event start = nullptr;
  rt::Event end = nullptr;
  if (rt::EventCreate(&start) == rt::kSuccess &&
      rt::EventCreate(&end) == rt::kSuccess) {
    float ms = -1.0f;
    caps_.timed_events =
        rt::EventRecord(start, stream) == rt::kSuccess &&
        rt::EventRecord(end, stream) == rt::kSuccess &&
        rt::EventSynchronize(end) == rt::kSuccess &&
        rt::EventElapsedTime(&ms, start, end) == rt::kSuccess && ms >= 0.0f;
  }
  if (start != nullptr) {
    rt::EventDestroy(start);
  }
  if (end != nullptr) {
    rt::EventDestroy(end);
  }
  // InfiniRT's CPU backend runs everything on the calling thread before
  // returning; accelerator backends queue work on their streams.
  caps_.async_execution = type_ != Type::kCpu;
  // ... on the calling thread's cores: InfiniOps' CPU kernels open OpenMP
  // regions (and its ATen-backed ones ATen's) on that thread's team.
  caps_.host_kernels = type_ == Type::kCpu;
  // InfiniRT exposes no portable blocking-sync event flag.
  caps_.blocking_events = false;
  // InfiniRT's stream capture, where this build and backend have it
  // (infini_graph.cpp).
  caps_.graphs = graphs_available(type_);
  if (have_dev) {
    rt::Free(dev);
  }
  if (have_host) {
    rt::FreeHost(host);
  }
  if (have_stream && stream != nullptr) {
    rt::StreamDestroy(stream);
  }
}

std::string InfiniProvider::device_name(int device) const {
  TORCH_CHECK(device >= 0 && device < device_count_, "invalid device index ",
              device);
  return "InfiniRT " + backend_ + ":" + std::to_string(device);
}

void InfiniProvider::mem_get_info(int device, size_t* free, size_t* total) {
  bind(device);
  INFINI_RT_CHECK(rt::MemGetInfo(free, total), "MemGetInfo");
}

void InfiniProvider::set_device(int device) {
  bind(device);
}

void* InfiniProvider::malloc(int device, size_t bytes) {
  bind(device);
  void* ptr = nullptr;
  if (rt::Malloc(&ptr, bytes) != rt::kSuccess) {
    return nullptr;
  }
  return ptr;
}

void InfiniProvider::free(int device, void* ptr) {
  bind(device);
  INFINI_RT_CHECK(rt::Free(ptr), "Free");
}

void* InfiniProvider::malloc_host(size_t bytes) {
  bind_backend();
  void* ptr = nullptr;
  if (rt::MallocHost(&ptr, bytes) != rt::kSuccess) {
    return nullptr;
  }
  return ptr;
}

void InfiniProvider::free_host(void* ptr) {
  bind_backend();
  INFINI_RT_CHECK(rt::FreeHost(ptr), "FreeHost");
}

StreamHandle InfiniProvider::stream_create(int device, int /*priority*/) {
  // InfiniRT has no stream priorities: every priority gets a plain stream.
  bind(device);
  rt::Stream stream = nullptr;
  INFINI_RT_CHECK(rt::StreamCreate(&stream), "StreamCreate");
  return stream;
}

void InfiniProvider::stream_synchronize(int device, StreamHandle stream) {
  bind(device);
  INFINI_RT_CHECK(rt::StreamSynchronize(static_cast<rt::Stream>(stream)),
                  "StreamSynchronize");
}

bool InfiniProvider::stream_query(int device, StreamHandle stream) {
  if (!caps_.async_execution) {
    return true;  // the backend finished everything before returning
  }
  // InfiniRT has no StreamQuery: ask an event recorded at the stream's tail.
  bind(device);
  rt::Event ev = nullptr;
  INFINI_RT_CHECK(rt::EventCreate(&ev), "EventCreate");
  const bool done =
      rt::EventRecord(ev, static_cast<rt::Stream>(stream)) == rt::kSuccess &&
      rt::EventQuery(ev) == rt::kSuccess;
  rt::EventDestroy(ev);
  return done;
}

void InfiniProvider::stream_wait_event(int device, StreamHandle stream,
                                       EventHandle event) {
  bind(device);
  INFINI_RT_CHECK(
      rt::StreamWaitEvent(static_cast<rt::Stream>(stream), event, 0),
      "StreamWaitEvent");
}

void InfiniProvider::device_synchronize(int device) {
  bind(device);
  INFINI_RT_CHECK(rt::DeviceSynchronize(), "DeviceSynchronize");
}

EventHandle InfiniProvider::event_create(int device, bool /*timing*/,
                                         bool /*blocking*/) {
  bind(device);
  rt::Event ev = nullptr;
  INFINI_RT_CHECK(rt::EventCreate(&ev), "EventCreate");
  return ev;
}

void InfiniProvider::event_destroy(int device, EventHandle event) {
  bind(device);
  INFINI_RT_CHECK(rt::EventDestroy(event), "EventDestroy");
}

void InfiniProvider::event_record(int device, EventHandle event,
                                  StreamHandle stream) {
  bind(device);
  INFINI_RT_CHECK(rt::EventRecord(event, static_cast<rt::Stream>(stream)),
                  "EventRecord");
}

bool InfiniProvider::event_query(int device, EventHandle event) {
  bind(device);
  // Any status but success reads as "not ready"; a real failure surfaces at
  // the next synchronize.
  return rt::EventQuery(event) == rt::kSuccess;
}

void InfiniProvider::event_synchronize(int device, EventHandle event) {
  bind(device);
  INFINI_RT_CHECK(rt::EventSynchronize(event), "EventSynchronize");
}

float InfiniProvider::event_elapsed_ms(int device, EventHandle start,
                                       EventHandle end) {
  TORCH_CHECK(caps_.timed_events, "elapsed_time: InfiniRT backend ", backend_,
              " has no timed events");
  bind(device);
  float ms = 0.0f;
  INFINI_RT_CHECK(rt::EventElapsedTime(&ms, start, end), "EventElapsedTime");
  return ms;
}

void InfiniProvider::memcpy_async(int device, void* dst, const void* src,
                                  size_t bytes, MemcpyKind kind,
                                  StreamHandle stream) {
  if (bytes == 0) {
    return;
  }
  bind(device);
  auto* s = static_cast<rt::Stream>(stream);
  if (caps_.async_copy) {
    INFINI_RT_CHECK(rt::MemcpyAsync(dst, src, bytes, to_rt(kind), s),
                    "MemcpyAsync");
    return;
  }
  // No asynchronous copy on this backend: order after the stream's work,
  // then copy synchronously.
  INFINI_RT_CHECK(rt::StreamSynchronize(s), "StreamSynchronize");
  INFINI_RT_CHECK(rt::Memcpy(dst, src, bytes, to_rt(kind)), "Memcpy");
}

OpKernels& InfiniProvider::kernels() {
  return *kernels_;
}

std::unique_ptr<Provider> make_infini_provider() {
  return std::make_unique<InfiniProvider>();
}

}  // namespace torch_infini::runtime::infini
