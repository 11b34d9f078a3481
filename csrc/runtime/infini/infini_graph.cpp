// Graphs on the Infini stack: InfiniRT's stream capture (StreamBeginCapture,
// StreamEndCapture, GraphInstantiate, GraphLaunch), which InfiniRT's public
// header declares from a38977e on when a compiled backend implements it
// (NVIDIA, Iluvatar, Hygon, MetaX, Moore, Cambricon, Ascend; not CPU).
//
// Both facts are read at build time, without a configure step: whether the
// header declares the API (overload resolution against stand-ins below), and
// which compiled backends implement it (whether their Runtime<> has the
// members). Where either is missing, capabilities.graphs is false and every
// graph call refuses, naming the backend.

#include <c10/util/Exception.h>

#include <atomic>
#include <mutex>
#include <type_traits>
#include <unordered_map>

#include "runtime/infini/infini_provider.h"

// Stand-ins for InfiniRT's graph functions, found beside InfiniRT's own by
// the same unqualified lookup (both through using-directives at namespace
// scope). Their C variadic parameter is the worst possible match, so where
// InfiniRT declares a function, its own wins; where it does not, these make
// the calls compile and say so by their return type.
namespace torch_infini_rt_graph_fallback {
struct NoGraphApi {};
inline NoGraphApi StreamBeginCapture(...) { return {}; }
inline NoGraphApi StreamEndCapture(...) { return {}; }
inline NoGraphApi GraphInstantiate(...) { return {}; }
inline NoGraphApi GraphDestroy(...) { return {}; }
inline NoGraphApi GraphExecDestroy(...) { return {}; }
inline NoGraphApi GraphLaunch(...) { return {}; }
}  // namespace torch_infini_rt_graph_fallback

namespace torch_infini::runtime::infini {
namespace {

namespace irt = ::infini::rt;
namespace rt = ::infini::rt::runtime;
using Type = irt::Device::Type;
using torch_infini_rt_graph_fallback::NoGraphApi;

// Converts to InfiniRT's StreamCaptureMode, which exists only where the
// API does (so it cannot be named here); the values are InfiniRT's:
// 0 global, 1 thread-local, 2 relaxed, as CUDA's.
struct AnyCaptureMode {
  int value = 0;
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  operator E() const {
    return static_cast<E>(value);
  }
};

namespace api {
using namespace ::infini::rt::runtime;
using namespace ::torch_infini_rt_graph_fallback;
// Graph and GraphExec are void* in InfiniRT's public header.
inline auto begin_capture(rt::Stream stream, int mode) {
  return StreamBeginCapture(stream, AnyCaptureMode{mode});
}
inline auto end_capture(rt::Stream stream, void** graph) {
  return StreamEndCapture(stream, graph);
}
inline auto instantiate(void** exec, void* graph) {
  return GraphInstantiate(exec, graph);
}
inline auto destroy_graph(void* graph) { return GraphDestroy(graph); }
inline auto destroy_exec(void* exec) { return GraphExecDestroy(exec); }
inline auto launch(void* exec, rt::Stream stream) {
  return GraphLaunch(exec, stream);
}
}  // namespace api

// Whether InfiniRT's public header declares the graph API.
constexpr bool kDeclared = !std::is_same_v<
    decltype(api::launch(nullptr, rt::Stream{})), NoGraphApi>;
static_assert(kDeclared == !std::is_same_v<decltype(api::begin_capture(
                                               rt::Stream{}, 0)),
                                           NoGraphApi>,
              "InfiniRT declares only part of its graph API");

// Whether a compiled backend's runtime implements stream capture.
template <Type T, typename = void>
struct BackendCaptures : std::false_type {};
template <Type T>
struct BackendCaptures<
    T, std::void_t<decltype(&rt::Runtime<T>::StreamBeginCapture),
                   decltype(&rt::Runtime<T>::GraphLaunch)>> : std::true_type {};

bool backend_captures(Type type) {
  switch (type) {
#ifdef TORCH_INFINI_RT_HAS_NVIDIA
    case Type::kNvidia:
      return BackendCaptures<Type::kNvidia>::value;
#endif
#ifdef TORCH_INFINI_RT_HAS_ILUVATAR
    case Type::kIluvatar:
      return BackendCaptures<Type::kIluvatar>::value;
#endif
#ifdef TORCH_INFINI_RT_HAS_HYGON
    case Type::kHygon:
      return BackendCaptures<Type::kHygon>::value;
#endif
#ifdef TORCH_INFINI_RT_HAS_METAX
    case Type::kMetax:
      return BackendCaptures<Type::kMetax>::value;
#endif
#ifdef TORCH_INFINI_RT_HAS_MOORE
    case Type::kMoore:
      return BackendCaptures<Type::kMoore>::value;
#endif
#ifdef TORCH_INFINI_RT_HAS_CAMBRICON
    case Type::kCambricon:
      return BackendCaptures<Type::kCambricon>::value;
#endif
#ifdef TORCH_INFINI_RT_HAS_ASCEND
    case Type::kAscend:
      return BackendCaptures<Type::kAscend>::value;
#endif
    default:
      return false;  // CPU, or a backend this build does not know
  }
}

// The captures begun here, by stream: InfiniRT has no capture-info query.
// (Streams that join a capture through events are not known here, so their
// allocations come from the ordinary pools.)
std::mutex g_mutex;
std::unordered_map<StreamHandle, uint64_t> g_capturing;
std::atomic<uint64_t> g_next_id{1};

template <typename Status>
void check(const Status& status, const char* what, const std::string& backend) {
  if constexpr (std::is_same_v<Status, NoGraphApi>) {
    TORCH_CHECK(false, "InfiniRT ", what, ": this build's InfiniRT has no "
                "graph API (backend ", backend, ")");
  } else {
    TORCH_CHECK(status == rt::kSuccess, "InfiniRT ", what,
                " failed with error ", static_cast<int>(status), " (backend ",
                backend, ")");
  }
}

int mode_value(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::kGlobal:
      return 0;
    case CaptureMode::kThreadLocal:
      return 1;
    case CaptureMode::kRelaxed:
      return 2;
  }
  return 0;
}

}  // namespace

bool graphs_available(Type backend) {
  return kDeclared && backend_captures(backend);
}

void InfiniProvider::stream_begin_capture(int device, StreamHandle stream,
                                          CaptureMode mode) {
  if (!caps_.graphs) {
    Provider::stream_begin_capture(device, stream, mode);  // refuses
  }
  bind(device);
  check(api::begin_capture(static_cast<rt::Stream>(stream), mode_value(mode)),
        "StreamBeginCapture", backend_);
  std::lock_guard<std::mutex> guard(g_mutex);
  g_capturing[stream] = g_next_id++;
}

GraphHandle InfiniProvider::stream_end_capture(int device,
                                               StreamHandle stream) {
  if (!caps_.graphs) {
    return Provider::stream_end_capture(device, stream);  // refuses
  }
  bind(device);
  {
    std::lock_guard<std::mutex> guard(g_mutex);
    g_capturing.erase(stream);
  }
  void* graph = nullptr;
  check(api::end_capture(static_cast<rt::Stream>(stream), &graph),
        "StreamEndCapture (the capture was invalidated, or was not begun on "
        "this stream)", backend_);
  void* exec = nullptr;
  const auto instantiated = api::instantiate(&exec, graph);
  check(api::destroy_graph(graph), "GraphDestroy", backend_);
  check(instantiated, "GraphInstantiate", backend_);
  return exec;
}

uint64_t InfiniProvider::stream_capture_id(int /*device*/,
                                           StreamHandle stream) {
  std::lock_guard<std::mutex> guard(g_mutex);
  auto it = g_capturing.find(stream);
  return it == g_capturing.end() ? 0 : it->second;
}

void InfiniProvider::graph_launch(int device, GraphHandle graph,
                                  StreamHandle stream) {
  if (!caps_.graphs) {
    Provider::graph_launch(device, graph, stream);  // refuses
  }
  bind(device);
  check(api::launch(graph, static_cast<rt::Stream>(stream)), "GraphLaunch",
        backend_);
}

void InfiniProvider::graph_destroy(int device, GraphHandle graph) {
  if (!caps_.graphs || graph == nullptr) {
    return;
  }
  bind(device);
  check(api::destroy_exec(graph), "GraphExecDestroy", backend_);
}

}  // namespace torch_infini::runtime::infini
