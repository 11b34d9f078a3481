#include "runtime/host/host_graph.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "runtime/host/host_provider.h"

namespace torch_infini::runtime::host {
namespace {

// The captures underway. Membership changes (begin, end, joins) and the
// checks of synchronizing calls take g_mutex, then a capture's own mutex;
// recording a task takes only the capture's.
std::atomic<int> g_underway{0};
std::atomic<uint64_t> g_next_id{1};
std::mutex g_mutex;

std::vector<std::unique_ptr<HostCapture>>& captures() {
  // Leaked on purpose: streams may queue work during interpreter shutdown.
  static auto& all =
      *std::make_unique<std::vector<std::unique_ptr<HostCapture>>>().release();
  return all;
}

const char* mode_name(CaptureMode mode) {
  switch (mode) {
    case CaptureMode::kGlobal:
      return "global";
    case CaptureMode::kThreadLocal:
      return "thread_local";
    case CaptureMode::kRelaxed:
      return "relaxed";
  }
  return "global";
}

// The capture whose mode refuses a potentially unsafe call made by this
// thread (cudaStreamCaptureMode's rules). Under g_mutex.
HostCapture* refusing_capture() {
  const auto self = std::this_thread::get_id();
  for (auto& c : captures()) {
    if (c->mode() == CaptureMode::kGlobal ||
        (c->mode() == CaptureMode::kThreadLocal && c->thread() == self)) {
      return c.get();
    }
  }
  return nullptr;
}

// The capture `event` was last recorded in, if any. Under g_mutex.
HostCapture* owner_of(const HostEvent* event) {
  for (auto& c : captures()) {
    if (c->recorded_here(event)) {
      return c.get();
    }
  }
  return nullptr;
}

[[noreturn]] void refuse(HostCapture& capture, const char* call,
                         const std::string& why) {
  capture.invalidate(std::string(call) + " was called during the capture");
  TORCH_CHECK(false, call,
              ": operation not permitted when stream is capturing (infini "
              "host runtime: ", why, "). The capture is invalidated: end it "
              "(capture_end raises) and capture again without this call; "
              "synchronize, read values (.item(), .cpu(), copies to pageable "
              "memory) and query events outside the capture");
}

[[noreturn]] void refuse_by_mode(HostCapture& capture, const char* call) {
  refuse(capture, call,
         std::string("a capture in \"") + mode_name(capture.mode()) +
             "\" mode is underway on device " +
             std::to_string(capture.device()) +
             ", which refuses synchronization " +
             (capture.mode() == CaptureMode::kGlobal ? "from every thread"
                                                     : "from its thread") +
             "; capture_error_mode=\"relaxed\" allows it for unrelated "
             "streams");
}

}  // namespace

HostCapture::HostCapture(HostStream& origin, CaptureMode mode, uint64_t id)
    : origin_(origin),
      mode_(mode),
      id_(id),
      thread_(std::this_thread::get_id()) {
  members_.push_back(Member{&origin, 0, 0});
}

HostCapture::Member& HostCapture::member(HostStream& stream) {
  for (Member& m : members_) {
    if (m.stream == &stream) {
      return m;
    }
  }
  members_.push_back(Member{&stream, 0, 0});
  return members_.back();
}

void HostCapture::check_valid() {
  TORCH_CHECK(invalid_.empty(),
              "operation failed due to a previous error during capture "
              "(infini host runtime: ", invalid_,
              "); end the capture and capture again");
}

void HostCapture::add_task(HostStream& from, Task task) {
  std::lock_guard<std::mutex> guard(mutex_);
  check_valid();
  GraphNode node;
  node.kind = GraphNode::Kind::kTask;
  node.task = std::make_shared<const Task>(std::move(task));
  nodes_.push_back(std::move(node));
  member(from).last_work = nodes_.size();
}

void HostCapture::add_record(HostStream& from,
                             std::shared_ptr<HostEvent> event) {
  std::lock_guard<std::mutex> guard(mutex_);
  check_valid();
  const HostEvent* key = event.get();
  GraphNode node;
  node.kind = GraphNode::Kind::kRecord;
  node.event = std::move(event);
  nodes_.push_back(std::move(node));
  const uint64_t seq = nodes_.size();
  member(from).last_work = seq;
  for (Recorded& r : recorded_) {
    if (r.event == key) {
      r.stream = &from;
      r.seq = seq;
      return;
    }
  }
  recorded_.push_back(Recorded{key, &from, seq});
}

void HostCapture::add_wait(HostStream& into,
                           const std::shared_ptr<HostEvent>& event) {
  std::lock_guard<std::mutex> guard(mutex_);
  check_valid();
  for (const Recorded& r : recorded_) {
    if (r.event == event.get()) {
      // Ordered by the list itself; what the recording stream did up to
      // the record is now joined into `into`.
      if (r.stream != &into) {
        Member& m = member(*r.stream);
        m.joined = std::max(m.joined, r.seq);
      }
      member(into);
      return;
    }
  }
  GraphNode node;
  node.kind = GraphNode::Kind::kWait;
  node.event = event;
  nodes_.push_back(std::move(node));
  member(into).last_work = nodes_.size();
}

bool HostCapture::recorded_here(const HostEvent* event) {
  std::lock_guard<std::mutex> guard(mutex_);
  return std::any_of(recorded_.begin(), recorded_.end(),
                     [&](const Recorded& r) { return r.event == event; });
}

void HostCapture::join(HostStream& stream) {
  std::lock_guard<std::mutex> guard(mutex_);
  member(stream);
  stream.set_capture(this);
}

void HostCapture::invalidate(const std::string& reason) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (invalid_.empty()) {
    invalid_ = reason;
  }
}

std::unique_ptr<HostGraph> HostCapture::finish() {
  std::lock_guard<std::mutex> guard(mutex_);
  for (Member& m : members_) {
    m.stream->set_capture(nullptr);
  }
  TORCH_CHECK(invalid_.empty(),
              "capture_end: operation failed due to a previous error during "
              "capture (infini host runtime: ", invalid_,
              "); the graph is discarded, capture again");
  for (const Member& m : members_) {
    TORCH_CHECK(m.stream == &origin_ || m.last_work <= m.joined,
                "capture_end: capture unjoined: a stream forked into the "
                "capture (by waiting on an event recorded in it) has work "
                "that the capturing stream does not wait for; record an "
                "event on that stream after its work and make the capturing "
                "stream wait on it before ending the capture");
  }
  return std::make_unique<HostGraph>(std::move(nodes_));
}

HostGraph::HostGraph(std::vector<GraphNode> nodes)
    : nodes_(std::move(nodes)), runs_(nodes_.size()) {
  for (size_t i = 0; i < nodes_.size();) {
    if (nodes_[i].kind != GraphNode::Kind::kTask) {
      ++i;
      continue;
    }
    auto run = std::make_shared<Run>();
    const size_t first = i;
    for (; i < nodes_.size() && nodes_[i].kind == GraphNode::Kind::kTask; ++i) {
      run->push_back(nodes_[i].task);
    }
    runs_[first] = std::move(run);
  }
}

void HostGraph::launch(HostStream& stream) const {
  for (size_t i = 0; i < nodes_.size(); ++i) {
    const GraphNode& node = nodes_[i];
    switch (node.kind) {
      case GraphNode::Kind::kTask:
        if (runs_[i] == nullptr) {
          break;  // inside a run queued at its first node
        }
        stream.enqueue([run = runs_[i]] {
          // Each kernel consumes its task's stack, so it runs a copy. A
          // failing kernel does not stop the others, as separate tasks
          // would not; the first error is the run's.
          std::exception_ptr failure;
          for (const auto& task : *run) {
            try {
              Task copy = *task;
              copy();
            } catch (...) {
              if (!failure) {
                failure = std::current_exception();
              }
            }
          }
          if (failure) {
            std::rethrow_exception(failure);
          }
        });
        break;
      case GraphNode::Kind::kRecord:
        if (!capture_event_record(node.event, stream)) {
          node.event->record(stream);
        }
        break;
      case GraphNode::Kind::kWait:
        if (!capture_event_wait(stream, node.event)) {
          node.event->block(stream);
        }
        break;
    }
  }
}

std::string HostGraph::describe() const {
  std::string text;
  size_t i = 0;
  for (const GraphNode& node : nodes_) {
    text += std::to_string(i++) + ": ";
    switch (node.kind) {
      case GraphNode::Kind::kTask:
        text += "kernel or copy\n";
        break;
      case GraphNode::Kind::kRecord:
        text += "event record\n";
        break;
      case GraphNode::Kind::kWait:
        text += "wait on an event recorded outside the capture\n";
        break;
    }
  }
  return text;
}

bool captures_underway() {
  return g_underway.load(std::memory_order_relaxed) > 0;
}

void check_stream_sync(HostStream& stream, const char* call) {
  if (!captures_underway()) {
    return;
  }
  std::lock_guard<std::mutex> guard(g_mutex);
  if (HostCapture* c = stream.capture()) {
    refuse(*c, call, "the stream is capturing, and its captured work runs "
                     "only when the graph is replayed");
  }
  if (HostCapture* c = refusing_capture()) {
    refuse_by_mode(*c, call);
  }
}

void check_event_sync(HostEvent& event, const char* call, bool blocking) {
  if (!captures_underway()) {
    return;
  }
  std::lock_guard<std::mutex> guard(g_mutex);
  if (HostCapture* c = owner_of(&event)) {
    refuse(*c, call, "the event was recorded in the capture, and runs only "
                     "when the graph is replayed");
  }
  if (blocking) {
    if (HostCapture* c = refusing_capture()) {
      refuse_by_mode(*c, call);
    }
  }
}

void check_device_sync(int device, const char* call) {
  if (!captures_underway()) {
    return;
  }
  std::lock_guard<std::mutex> guard(g_mutex);
  for (auto& c : captures()) {
    if (c->device() == device) {
      refuse(*c, call, "a stream of the device is capturing, and its "
                       "captured work runs only when the graph is replayed");
    }
  }
}

bool capture_event_record(const std::shared_ptr<HostEvent>& event,
                          HostStream& stream) {
  if (!captures_underway()) {
    return false;
  }
  if (HostCapture* c = stream.capture()) {
    c->add_record(stream, event);
    return true;
  }
  return false;
}

bool capture_event_wait(HostStream& stream,
                        const std::shared_ptr<HostEvent>& event) {
  if (!captures_underway()) {
    return false;
  }
  std::lock_guard<std::mutex> guard(g_mutex);
  HostCapture* owner = owner_of(event.get());
  HostCapture* mine = stream.capture();
  if (owner != nullptr && mine == nullptr) {
    owner->join(stream);  // a fork into the capture
    mine = owner;
  }
  if (owner != nullptr && mine != owner) {
    owner->invalidate("two captures were merged by an event wait");
    mine->invalidate("two captures were merged by an event wait");
    TORCH_CHECK(false, "wait_event: operation not permitted when stream is "
                "capturing (infini host runtime: the event was recorded in "
                "another capture; captures cannot be merged)");
  }
  if (mine == nullptr) {
    return false;
  }
  mine->add_wait(stream, event);
  return true;
}

void begin_capture(HostStream& stream, CaptureMode mode) {
  std::lock_guard<std::mutex> guard(g_mutex);
  TORCH_CHECK(stream.capture() == nullptr,
              "capture_begin: the stream is already capturing; end that "
              "capture first");
  auto capture = std::make_unique<HostCapture>(stream, mode, g_next_id++);
  stream.set_capture(capture.get());
  captures().push_back(std::move(capture));
  ++g_underway;
}

std::unique_ptr<HostGraph> end_capture(HostStream& stream) {
  std::unique_ptr<HostCapture> capture;
  {
    std::lock_guard<std::mutex> guard(g_mutex);
    HostCapture* c = stream.capture();
    TORCH_CHECK(c != nullptr, "capture_end: the stream is not capturing");
    TORCH_CHECK(&c->origin() == &stream,
                "capture_end: called on a stream that joined the capture; "
                "end it on the stream that began it");
    auto& all = captures();
    auto it = std::find_if(all.begin(), all.end(),
                           [&](const auto& p) { return p.get() == c; });
    capture = std::move(*it);
    all.erase(it);
    --g_underway;
  }
  return capture->finish();
}

// HostProvider's graph entry points (declared in host_provider.h).

void HostProvider::stream_begin_capture(int device, StreamHandle handle,
                                        CaptureMode mode) {
  begin_capture(stream(device, handle), mode);
}

GraphHandle HostProvider::stream_end_capture(int device, StreamHandle handle) {
  return end_capture(stream(device, handle)).release();
}

uint64_t HostProvider::stream_capture_id(int device, StreamHandle handle) {
  HostCapture* c = stream(device, handle).capture();
  return c == nullptr ? 0 : c->id();
}

void HostProvider::graph_launch(int device, GraphHandle graph,
                                StreamHandle handle) {
  TORCH_CHECK(graph != nullptr, "replay: no graph");
  static_cast<const HostGraph*>(graph)->launch(stream(device, handle));
}

void HostProvider::graph_destroy(int /*device*/, GraphHandle graph) {
  // Launched work holds its own handles to the nodes it runs.
  std::unique_ptr<HostGraph> owned(static_cast<HostGraph*>(graph));
}

std::string HostProvider::graph_describe(int /*device*/, GraphHandle graph) {
  return graph == nullptr ? std::string()
                          : static_cast<const HostGraph*>(graph)->describe();
}

}  // namespace torch_infini::runtime::host
