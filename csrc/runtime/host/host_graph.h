#pragma once

// Stream capture on the built-in host runtime, shaped like CUDA's.
//
// While a stream is capturing, HostStream::enqueue hands its tasks (kernels,
// copies) to the capture instead of queueing them; event records and waits
// made on it become nodes of the graph. A stream that waits on an event
// recorded in the capture joins it (CUDA's cross-stream capture) and must be
// joined back before the capture ends. The graph is one list of nodes in the
// order they were queued: every dependency (stream order, event waits) points
// to work queued earlier, so running the list in order on one stream is a
// valid schedule. Replay queues each node on the replay stream: a kernel node
// costs a copy of a small handle, none of the dispatch, metadata or
// allocation work of the eager call that recorded it (scalars and layouts
// are those of the capture, as in a CUDA graph).
//
// Calls that would wait for work that only runs at replay (synchronizing or
// querying the capturing stream or an event recorded in the capture, the
// whole device) raise and invalidate the capture, as CUDA's do; in "global"
// mode stream and event synchronization anywhere, in "thread_local" mode on
// the capturing thread, are refused likewise.

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/host/host_stream.h"
#include "runtime/runtime.h"

namespace torch_infini::runtime::host {

// One recorded step of a graph.
struct GraphNode {
  enum class Kind { kTask, kRecord, kWait };
  Kind kind = Kind::kTask;
  // kTask: the queued work, copied for every run (a run consumes its stack).
  std::shared_ptr<const Task> task;
  // kRecord: re-recorded on the replay stream; kWait: an event recorded
  // outside the capture, waited on as it stands at replay (cudaEventWaitExternal).
  std::shared_ptr<HostEvent> event;
};

// A captured graph: what replay queues, in order.
class HostGraph {
 public:
  explicit HostGraph(std::vector<GraphNode> nodes);
  const std::vector<GraphNode>& nodes() const { return nodes_; }
  // Queues every node on `stream`: each run of consecutive kernels as one
  // task (the worker runs them back to back, without a queue hand-off per
  // kernel), each event record and wait as its own.
  void launch(HostStream& stream) const;
  // One line per node: its kind (debug_dump).
  std::string describe() const;

 private:
  using Run = std::vector<std::shared_ptr<const Task>>;

  std::vector<GraphNode> nodes_;
  // Per node: the run of kernels that starts there (null inside a run and
  // for event nodes).
  std::vector<std::shared_ptr<const Run>> runs_;
};

// A capture underway (see the top of this file).
class HostCapture {
 public:
  HostCapture(HostStream& origin, CaptureMode mode, uint64_t id);

  uint64_t id() const { return id_; }
  int device() const { return origin_.device(); }
  HostStream& origin() const { return origin_; }
  CaptureMode mode() const { return mode_; }
  std::thread::id thread() const { return thread_; }

  // Records a task queued on `from`, a stream of this capture. Raises if
  // the capture was invalidated (cudaErrorStreamCaptureInvalidated).
  void add_task(HostStream& from, Task task);
  // An event recorded on `from` during the capture.
  void add_record(HostStream& from, std::shared_ptr<HostEvent> event);
  // `into`, a stream of this capture, waits on `event`: recorded in this
  // capture (a join, ordered by the list itself) or outside it (a node).
  void add_wait(HostStream& into, const std::shared_ptr<HostEvent>& event);
  // Whether `event`'s last record was made in this capture.
  bool recorded_here(const HostEvent* event);
  // `stream` waited on an event of this capture: it records into it now.
  void join(HostStream& stream);

  // Marks the capture invalid (the first reason is kept).
  void invalidate(const std::string& reason);
  // Ends the capture: detaches its streams and returns the graph, or raises
  // why it is invalid or which stream was not joined back.
  std::unique_ptr<HostGraph> finish();

 private:
  struct Member {
    HostStream* stream = nullptr;
    uint64_t last_work = 0;  // sequence number of its last node
    uint64_t joined = 0;     // its last node a wait in another stream covers
  };
  struct Recorded {
    const HostEvent* event = nullptr;
    HostStream* stream = nullptr;
    uint64_t seq = 0;
  };

  Member& member(HostStream& stream);  // under mutex_
  void check_valid();                  // under mutex_

  HostStream& origin_;
  const CaptureMode mode_;
  const uint64_t id_;
  const std::thread::id thread_;
  std::mutex mutex_;
  std::vector<GraphNode> nodes_;
  std::vector<Member> members_;
  std::vector<Recorded> recorded_;
  std::string invalid_;
};

// Whether any capture is underway in the process (a relaxed atomic read: the
// hooks below cost nothing when no capture is).
bool captures_underway();

// Hooks of HostProvider's synchronizing calls: raise (and invalidate the
// capture) where the call would wait for captured work, or is refused by a
// capture's mode. `call` names the API for the message.
void check_stream_sync(HostStream& stream, const char* call);
void check_event_sync(HostEvent& event, const char* call, bool blocking);
void check_device_sync(int device, const char* call);

// Event records and waits: handled (returns true) when they touch a capture.
bool capture_event_record(const std::shared_ptr<HostEvent>& event,
                          HostStream& stream);
bool capture_event_wait(HostStream& stream,
                        const std::shared_ptr<HostEvent>& event);

// Begins a capture on `stream` (which must not be capturing already).
void begin_capture(HostStream& stream, CaptureMode mode);
// Ends the capture `stream` began; returns its graph or raises.
std::unique_ptr<HostGraph> end_capture(HostStream& stream);

}  // namespace torch_infini::runtime::host
