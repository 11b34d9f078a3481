#pragma once

// Graphs of the infini device, in the shape of at::cuda::CUDAGraph: capture
// the work queued on the current stream into a graph, replay it, with the
// memory it allocates kept in a graph-private pool of the caching allocator
// (core/InfiniAllocator.h). Registered as PrivateUse1's
// at::GraphImplInterface, so torch.accelerator.Graph uses it too. What
// capture records and refuses is the provider's (runtime/runtime.h).

#include <c10/core/Allocator.h>
#include <c10/core/Stream.h>
#include <c10/util/SmallVector.h>

#include <cstdint>
#include <string>

#include "core/TorchVersion.h"
#include "runtime/runtime.h"

#if TORCH_INFINI_TORCH_AT_LEAST(2, 12)
#include <ATen/core/GraphImplInterface.h>
#endif

namespace torch_infini {

#if TORCH_INFINI_TORCH_AT_LEAST(2, 12)
using GraphInterface = at::GraphImplInterface;
using GraphCaptureMode = at::GraphCaptureMode;
using GraphArgs = at::GraphImplArgs;
#else
// PyTorch 2.12 added at::GraphImplInterface (and torch.accelerator.Graph on
// it). Before it, the same shape of our own: torch.infini's graphs work the
// same, and there is no torch.accelerator.Graph to register with.
enum class GraphCaptureMode : int8_t { Default = 0, Global, ThreadLocal, Relaxed };
struct GraphArgs {
  bool keep_graph = false;
};
struct GraphInterface {
  virtual ~GraphInterface() = default;
  virtual void capture_begin(c10::MempoolId_t pool, GraphCaptureMode mode) = 0;
  virtual void capture_end() = 0;
  virtual void instantiate() = 0;
  virtual void replay() = 0;
  virtual void reset() = 0;
  virtual c10::MempoolId_t pool() const = 0;
  virtual void enable_debug_mode() = 0;
  virtual void debug_dump(const std::string& path) = 0;
};
#endif

class InfiniGraph final : public GraphInterface {
 public:
  explicit InfiniGraph(const GraphArgs& args = {});
  ~InfiniGraph() override;
  InfiniGraph(const InfiniGraph&) = delete;
  InfiniGraph& operator=(const InfiniGraph&) = delete;

  // `pool` {0, 0}: a pool of the graph's own; otherwise one shared with
  // the graphs given the same id (graph_pool_handle(), another's pool()).
  void capture_begin(c10::MempoolId_t pool = {0, 0},
                     GraphCaptureMode mode =
                         GraphCaptureMode::Default) override;
  void capture_end() override;
  void instantiate() override;
  void replay() override;
  void reset() override;
  c10::MempoolId_t pool() const override;
  void enable_debug_mode() override;
  void debug_dump(const std::string& path) override;

 private:
  const bool keep_graph_;
  bool capturing_ = false;
  bool has_graph_ = false;
  bool instantiated_ = false;
  bool debug_ = false;
  c10::DeviceIndex device_ = -1;
  c10::StreamId capture_stream_ = 0;
  c10::MempoolId_t mempool_id_{0, 0};
  runtime::GraphHandle graph_ = nullptr;
  // Streams replays ran on (the pool keeps its memory until they are done).
  c10::SmallVector<c10::StreamId, 2> replay_streams_;
};

// A new pool id for graphs to share (torch.cuda.graph_pool_handle()).
c10::MempoolId_t graph_pool_handle();

// Whether `stream` is being captured into a graph.
bool is_stream_capturing(const c10::Stream& stream);

// Whether any infini graph capture is underway in the process: a relaxed
// read, so the hot path pays nothing when none is.
bool capture_underway() noexcept;

// Raises CUDA's capture error for `op`, which cannot be captured on the
// current stream of `device` (it must wait for the stream, or its result
// depends on the data), if that stream is capturing. `why` says what the
// operator needs.
void check_capturable(const char* op, c10::DeviceIndex device,
                      const std::string& why);
// The same for `stream`, a device's current stream its caller has resolved.
void check_capturable(const char* op, const c10::Stream& stream,
                      const std::string& why);

}  // namespace torch_infini
