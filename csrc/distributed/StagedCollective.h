#pragma once

// Collectives on infini tensors run by a host (CPU) c10d backend over pinned
// staging buffers, stream-ordered like a device collective.
//
// On the calling thread: the inputs are copied into pinned host buffers on
// the current stream (queued, not waited for) and an event is recorded after
// them. Two threads per process group then run the jobs in submission order:
// - the issuer waits for that event (the inputs are on the host) and starts
//   the host collective, without waiting for it, so the host backend sees
//   every collective in program order and can overlap them as it would;
// - the completer waits for each host collective in the same order, queues
//   the copies of its results back to the device on the group's
//   communication stream, records the `done` event and completes the Work.
// The calling thread is never blocked by the device or by the collective.
//
// Where the provider's device memory is host-addressable (the built-in host
// runtime) and the tensors are contiguous, the host collective works in
// place on aliases of the device memory instead: no staging copies, the
// same ordering (it starts after the inputs-ready event; wait() returns
// after it has finished). TORCH_INFINI_DISTRIBUTED_STAGING=1 forces the
// staging copies.

#include <ATen/core/Tensor.h>
#include <c10/core/Event.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "distributed/InfiniWork.h"
#include "ops/common.h"

namespace torch_infini::distributed {

struct StagedJob {
  // `direct`: the host collective works in place on host aliases of the
  // device memory (providers whose memory is host-addressable) instead of
  // on staged copies. Either way it starts after the inputs-ready event.
  StagedJob(c10::Device device, bool direct) : device(device), direct(direct) {}

  // The host tensor the host collective reads for device tensor `t`.
  at::Tensor input(const at::Tensor& t) { return direct ? ops::host_alias(t) : stage_in(t); }
  // The host tensor it writes for `t` (copied back unless direct).
  at::Tensor output(const at::Tensor& t);
  // Both: read and written in place (all_reduce, broadcast, ...).
  at::Tensor inout(const at::Tensor& t);

  // A pinned host copy of device tensor `t`, queued on the current stream.
  static at::Tensor stage_in(const at::Tensor& t);
  // An uninitialized pinned host tensor with `t`'s shape and dtype.
  static at::Tensor host_like(const at::Tensor& t);

  c10::Device device;
  bool direct;
  // Where the copy-backs are queued and `done` is recorded.
  std::optional<c10::Stream> comm_stream;
  std::optional<c10::Event> inputs_ready;
  // Starts the host collective on the staging buffers (issuer thread). Null
  // for a coalescing marker. It holds what it needs (the host backend too):
  // a job never reaches back into its process group.
  std::function<c10::intrusive_ptr<c10d::Work>()> issue;
  std::vector<std::pair<at::Tensor, at::Tensor>> copy_backs;  // (device, host)
  c10::intrusive_ptr<InfiniWork> work;
  // A coalescing marker completes `work` once all of `members` have (staged
  // ones and, for CPU tensors, the host backend's own).
  std::vector<c10::intrusive_ptr<c10d::Work>> members;

  c10::intrusive_ptr<c10d::Work> host_work;  // set by the issuer
  std::exception_ptr error;                  // set by the issuer
};

class StagedQueue {
 public:
  StagedQueue();
  ~StagedQueue();
  StagedQueue(const StagedQueue&) = delete;
  StagedQueue& operator=(const StagedQueue&) = delete;

  // Records the inputs-ready event on the current stream and queues `job`.
  void submit(std::shared_ptr<StagedJob> job);
  // Runs every job submitted so far to completion, then stops the threads.
  // Safe from the queue's own threads (the last reference to a process group
  // can go in a future's callback on the completer): those threads are then
  // detached and finish on their own, as they share only `State`.
  void shutdown();

 private:
  struct Channel {
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<std::shared_ptr<StagedJob>> jobs;
    bool closed = false;

    void push(std::shared_ptr<StagedJob> job);
    void close();
    // Null once closed and drained.
    std::shared_ptr<StagedJob> pop();
  };
  struct State {
    Channel to_issue;
    Channel to_complete;
  };

  static void run_issuer(std::shared_ptr<State> state);
  static void run_completer(std::shared_ptr<State> state);
  static void complete(StagedJob& job);

  std::shared_ptr<State> state_;
  std::mutex shutdown_mutex_;
  bool stopped_ = false;
  std::thread issuer_;
  std::thread completer_;
};

}  // namespace torch_infini::distributed
