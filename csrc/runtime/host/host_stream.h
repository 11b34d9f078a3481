#pragma once

// The built-in host runtime's queues. A HostStream is an in-order queue of
// work executed by its own worker thread, so work submitted by the caller
// returns before it runs, exactly as on an accelerator. A HostEvent marks a
// position in such a queue.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace torch_infini::runtime::host {

using Task = std::function<void()>;
using Clock = std::chrono::steady_clock;

class HostStream {
 public:
  HostStream(int device, int priority);
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  int device() const { return device_; }
  int priority() const { return priority_; }

  // Queues `task`; returns at once. Tasks run in submission order. Returns
  // the task's ticket: the stream has run it once completed() reaches it.
  uint64_t enqueue(Task task);
  // Whether the task with `ticket` has run (and everything before it).
  bool reached(uint64_t ticket);
  // Blocks until the task with `ticket` has run. Does not report task errors:
  // those belong to synchronize() and query().
  void wait_for(uint64_t ticket);
  // Blocks until everything queued so far has run. Rethrows the first error a
  // task raised since the last synchronize (errors are sticky until seen, as
  // asynchronous errors are on an accelerator).
  void synchronize();
  // True when nothing queued is still pending.
  bool query();

 private:
  void run();
  void raise_pending_error_locked(std::unique_lock<std::mutex>& lock);

  const int device_;
  const int priority_;
  std::mutex mutex_;
  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  std::deque<Task> queue_;
  // Written under mutex_ (so condition variables see them consistently), read
  // without it while spinning.
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> completed_{0};
  // Wake-ups are system calls: signal the worker only when it sleeps, and
  // waiters only when there are any, so a busy queue runs without them.
  bool worker_sleeping_ = false;
  int sync_waiters_ = 0;
  bool stopping_ = false;
  std::string error_;
  std::thread worker_;
};

// An event is recorded into a stream: it completes when the stream's worker
// has run past that position (the stream's own completion counter, so an
// event and its stream never disagree), and timestamps that moment.
class HostEvent {
 public:
  HostEvent(int device, bool timing) : device_(device), timing_(timing) {}

  int device() const { return device_; }
  bool timing() const { return timing_; }

  void record(HostStream& stream);
  // Makes `stream` wait, in its queue, for the most recent record of this
  // event at the time of the call (CUDA's cudaStreamWaitEvent semantics: a
  // later record does not change what an earlier wait waits for).
  void block(HostStream& stream);
  bool query();
  void synchronize();
  // Milliseconds from `start` to this event; both must have completed.
  float elapsed_since(HostEvent& start);

 private:
  // One record: where it sits in which queue, and when the worker got there.
  struct Mark {
    HostStream* stream = nullptr;  // pool streams live as long as the process
    uint64_t ticket = 0;
    Clock::time_point time{};
  };

  std::shared_ptr<Mark> last_mark();

  const int device_;
  const bool timing_;
  std::mutex mutex_;
  std::shared_ptr<Mark> last_;  // null until first recorded
};

}  // namespace torch_infini::runtime::host
