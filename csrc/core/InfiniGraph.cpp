#include "core/InfiniGraph.h"

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <fstream>

#include "core/InfiniAllocator.h"
#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"

namespace torch_infini {
namespace {

// Pool ids, as CUDA numbers them: a graph's own pool is {n, 0}, a handle
// from graph_pool_handle() is {0, n}; n is unique in the process.
std::atomic<c10::CaptureId_t> g_next_pool{1};
std::atomic<int> g_captures{0};

runtime::CaptureMode capture_mode(GraphCaptureMode mode) {
  switch (mode) {
    case GraphCaptureMode::ThreadLocal:
      return runtime::CaptureMode::kThreadLocal;
    case GraphCaptureMode::Relaxed:
      return runtime::CaptureMode::kRelaxed;
    case GraphCaptureMode::Default:  // CUDA's default is global too
    case GraphCaptureMode::Global:
      return runtime::CaptureMode::kGlobal;
  }
  return runtime::CaptureMode::kGlobal;
}

c10::Stream stream_with_id(c10::DeviceIndex device, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE, c10::Device(kInfini, device), id);
}

}  // namespace

InfiniGraph::InfiniGraph(const GraphArgs& args)
    : keep_graph_(args.keep_graph) {}

InfiniGraph::~InfiniGraph() {
  try {
    if (capturing_) {
      // Abandoned mid-capture: end the capture, or the stream would go on
      // recording (never running) everything queued on it.
      capturing_ = false;
      --g_captures;
      allocator::end_allocate_to_pool(device_, mempool_id_);
      allocator::release_pool(device_, mempool_id_);
      auto& rt = runtime::provider();
      rt.graph_destroy(device_, rt.stream_end_capture(
                                    device_, native_stream(stream_with_id(
                                                 device_, capture_stream_))));
    }
  } catch (...) {
    // An invalidated capture raises at its end: it is discarded either way.
  }
  try {
    reset();
  } catch (...) {
    // Never throw from a destructor (the interpreter may be exiting).
  }
}

void InfiniGraph::capture_begin(c10::MempoolId_t pool,
                                GraphCaptureMode mode) {
  TORCH_CHECK(!has_graph_ && !capturing_,
              "This InfiniGraph instance already owns a captured graph. To "
              "capture a new graph, create a new instance or call reset() "
              "first.");
  const c10::DeviceIndex device = current_device();
  const c10::Stream stream = current_stream(device);
  TORCH_CHECK(stream != default_stream(device),
              "InfiniGraphs must be captured on a non-default stream. "
              "(However, after capture, it's ok to replay them on the "
              "default stream.)");
  TORCH_CHECK(pool.first == 0 || pool.second == 0,
              "capture_begin: invalid pool id (", pool.first, ", ",
              pool.second, "); pass graph_pool_handle() or another graph's "
              "pool()");
  auto& rt = runtime::provider();
  const runtime::StreamHandle native = native_stream(stream);
  rt.stream_begin_capture(device, native, capture_mode(mode));
  const uint64_t id = rt.stream_capture_id(device, native);
  const c10::MempoolId_t mempool =
      pool.first != 0 || pool.second != 0
          ? pool
          : c10::MempoolId_t{g_next_pool++, 0};
  try {
    allocator::begin_allocate_to_pool(
        device, mempool, [device, id](c10::StreamId s) {
          return runtime::provider().stream_capture_id(
                     device, native_stream(stream_with_id(device, s))) == id;
        });
  } catch (...) {
    rt.graph_destroy(device, rt.stream_end_capture(device, native));
    throw;
  }
  device_ = device;
  capture_stream_ = stream.id();
  mempool_id_ = mempool;
  capturing_ = true;
  ++g_captures;
}

void InfiniGraph::capture_end() {
  TORCH_CHECK(capturing_, "capture_end: capture_begin was not called on "
              "this InfiniGraph");
  const c10::Stream stream = current_stream(device_);
  TORCH_CHECK(stream.id() == capture_stream_,
              "Capture must end on the same stream it began on.");
  auto& rt = runtime::provider();
  allocator::end_allocate_to_pool(device_, mempool_id_);
  capturing_ = false;
  --g_captures;
  try {
    graph_ = rt.stream_end_capture(device_, native_stream(stream));
  } catch (...) {
    // The capture was invalidated: nothing will replay the pool.
    allocator::release_pool(device_, mempool_id_);
    throw;
  }
  has_graph_ = true;
  if (!keep_graph_) {
    instantiate();
  }
}

void InfiniGraph::instantiate() {
  TORCH_CHECK(has_graph_, "Called InfiniGraph::instantiate without a "
              "preceding successful capture.");
  // The provider's graph is ready to launch once captured.
  instantiated_ = true;
}

void InfiniGraph::replay() {
  TORCH_CHECK(has_graph_, "Called InfiniGraph::replay without a preceding "
              "successful capture.");
  if (!instantiated_) {
    instantiate();
  }
  c10::DeviceGuard guard(c10::Device(kInfini, device_));
  const c10::Stream stream = current_stream(device_);
  if (std::find(replay_streams_.begin(), replay_streams_.end(),
                stream.id()) == replay_streams_.end()) {
    allocator::note_pool_stream(device_, mempool_id_, stream.id());
    replay_streams_.push_back(stream.id());
  }
  runtime::provider().graph_launch(device_, graph_, native_stream(stream));
}

void InfiniGraph::reset() {
  TORCH_CHECK(!capturing_, "InfiniGraph::reset: a capture is underway; end "
              "it with capture_end() first");
  if (!has_graph_) {
    return;
  }
  runtime::provider().graph_destroy(device_, graph_);
  allocator::release_pool(device_, mempool_id_);
  graph_ = nullptr;
  has_graph_ = false;
  instantiated_ = false;
  replay_streams_.clear();
}

c10::MempoolId_t InfiniGraph::pool() const {
  TORCH_CHECK(has_graph_ || capturing_, "Called InfiniGraph::pool() without "
              "a preceding successful capture.");
  return mempool_id_;
}

void InfiniGraph::enable_debug_mode() {
  debug_ = true;
}

void InfiniGraph::debug_dump(const std::string& path) {
  if (!debug_) {
    TORCH_WARN("InfiniGraph::debug_dump: debug mode is off; call "
               "enable_debug_mode() before capture_begin()");
    return;
  }
  TORCH_CHECK(has_graph_, "InfiniGraph::debug_dump: no captured graph");
  std::ofstream out(path);
  TORCH_CHECK(out.good(), "InfiniGraph::debug_dump: cannot write ", path);
  out << runtime::provider().graph_describe(device_, graph_);
}

c10::MempoolId_t graph_pool_handle() {
  return {0, g_next_pool++};
}

bool is_stream_capturing(const c10::Stream& stream) {
  if (!capture_underway()) {
    return false;
  }
  return runtime::provider().stream_capture_id(stream.device_index(),
                                               native_stream(stream)) != 0;
}

bool capture_underway() noexcept {
  return g_captures.load(std::memory_order_relaxed) > 0;
}

void check_capturable(const char* op, c10::DeviceIndex device,
                      const std::string& why) {
  if (capture_underway()) {
    check_capturable(op, current_stream(device), why);
  }
}

void check_capturable(const char* op, const c10::Stream& stream,
                      const std::string& why) {
  if (!capture_underway() || !is_stream_capturing(stream)) {
    return;
  }
  // Synchronizing the capturing stream raises the provider's capture error
  // and invalidates the capture, as the operator would on CUDA.
  try {
    runtime::provider().stream_synchronize(stream.device_index(),
                                           native_stream(stream));
  } catch (const c10::Error& e) {
    TORCH_CHECK(false, op, " cannot be captured into a graph: ", why, ". ",
                e.what_without_backtrace());
  }
  TORCH_CHECK(false, op, " cannot be captured into a graph: ", why);
}

}  // namespace torch_infini

#if TORCH_INFINI_TORCH_AT_LEAST(2, 12)  // the registry came with 2.12
namespace at {
// torch.accelerator.Graph creates graphs through this registry, keyed by the
// device type's name (PrivateUse1 is renamed "infini" before any is made).
C10_REGISTER_CLASS(GraphImplRegistry, INFINI, torch_infini::InfiniGraph)
}  // namespace at
#endif
