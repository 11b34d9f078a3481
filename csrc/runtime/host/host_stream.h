#pragma once

// The built-in host runtime's queues. A HostStream is an in-order queue of
// work executed by its own worker thread, so work submitted by the caller
// returns before it runs, exactly as on an accelerator. A HostEvent marks a
// position in such a queue.
//
// Execution ownership: at most one thread runs a stream's tasks at a time,
// always the front task, so tasks run one after another in submission order.
// That thread is usually the worker; but a thread that must wait for tasks
// nobody has started yet (a synchronize, an event wait, a .cpu(), a
// submission to a full queue) runs them itself instead of waking the worker
// and sleeping: a synchronous small op then costs no thread hand-off, and on
// a loaded machine no wake-up of a descheduled worker. A worker that finishes a task while a caller waits
// leaves it the rest, which then run with the caller's intra-op threads, as
// in CPU eager (see worker_intra_op_threads in host_stream.cpp). Either way the task sees the same thread-local state
// (see runtime/host/kernel_state.h), errors are sticky the same way, and
// events take their timestamps when their position is reached.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <c10/util/FunctionRef.h>

#include "runtime/host/host_task.h"

namespace torch_infini::runtime::host {

using Clock = std::chrono::steady_clock;

class HostCapture;  // runtime/host/host_graph.h

// Intra-op threads of the kernels a stream worker runs (see host_stream.cpp).
int worker_intra_op_threads();

class HostStream {
 public:
  HostStream(int device, int priority);
  ~HostStream();
  HostStream(const HostStream&) = delete;
  HostStream& operator=(const HostStream&) = delete;

  int device() const { return device_; }
  int priority() const { return priority_; }

  // Queues `task`; returns at once, unless the queue already holds
  // kMaxQueueDepth pending tasks: then the caller first runs pending tasks
  // (as a waiting caller does, see wait_for) until kResumeDepth are left
  // (backpressure, as a CUDA launch blocks on a full queue), so a fast
  // producer cannot grow host memory without bound.
  // `may_block=false` never waits: event records, which the allocators queue
  // under their locks; waits on events, which PyTorch queues holding the GIL
  // (see HostEvent::block); and anything queued from a worker thread (a
  // worker waiting on another stream's full queue could close a cycle of
  // waits).
  // Tasks run in submission order. Returns the task's ticket: the stream has
  // run it once completed() reaches it.
  uint64_t enqueue(Task task, bool may_block = true);
  // Runs `work` now on the calling thread, as the stream's next task, and
  // returns true; or runs nothing and returns false (then queue it). It runs
  // now only where the caller waits for its work as it queues it: it waited
  // for the stream's last task while no other was pending (a loop of small
  // synchronous ops, or of reads of their results), and nothing has been
  // queued since. Once per such wait: work queued ahead of a later wait
  // stays asynchronous. Never under a graph capture, a profiler's trace,
  // TORCH_INFINI_LAUNCH_BLOCKING, on a worker, or inside a task. `work`
  // sees what a queued task sees (runtime/host/kernel_state.h), and what it
  // raises is the stream's sticky error, reported at the next
  // synchronization as a queued task's would be. A queued call snapshots
  // its arguments for the worker; a call run now skips that
  // (runtime/host/host_kernels.cpp).
  bool run_now(c10::function_ref<void()> work);
  // How many tasks run_now() has run.
  uint64_t ran_now() const { return ran_now_.load(std::memory_order_relaxed); }
  // Queues `task` behind the work queued so far, even while the stream is
  // captured (it is the process's bookkeeping, not the program's work), and
  // never waits: the host runtime releases memory shared between processes
  // this way once the streams have passed it (runtime/host/host_ipc.cpp).
  void enqueue_release(Task task);
  // The ticket of the last task queued so far.
  uint64_t submitted() const { return submitted_.load(); }
  // Whether the task with `ticket` has run (and everything before it).
  bool reached(uint64_t ticket);
  // Blocks until the task with `ticket` has run; runs pending tasks itself
  // while the worker is not on them (see the top of this file). Does not
  // report task errors: those belong to the synchronizing calls.
  void wait_for(uint64_t ticket);
  // Blocks until everything queued so far has run, without reporting errors.
  void wait_idle();
  // Blocks until everything queued so far has run. Rethrows the first error a
  // task raised since it was last reported (errors are sticky until seen, as
  // asynchronous errors are on an accelerator).
  void synchronize();
  // True when nothing queued is still pending; then reports a pending error.
  // Wakes a worker whose wake-up was deferred (see defer_wakes_).
  bool query();
  // Takes (clears and returns) the pending error if the task that raised it
  // is at or before `ticket`; empty when there is none.
  std::string take_error(uint64_t ticket = UINT64_MAX);
  // Rethrows take_error(ticket) if there is one.
  void raise_error(uint64_t ticket = UINT64_MAX);

  // Graph capture (runtime/host/host_graph.h): while a capture is set,
  // enqueue() hands tasks to it instead of queueing them.
  HostCapture* capture() const {
    return capture_.load(std::memory_order_acquire);
  }
  void set_capture(HostCapture* capture) { capture_.store(capture); }

  static constexpr size_t kMaxQueueDepth = 1024;
  static constexpr size_t kResumeDepth = kMaxQueueDepth * 3 / 4;

 private:
  void run();
  // Appends a task to the queue (no capture, no profiler, no backpressure);
  // returns its ticket.
  uint64_t push(Task&& task);
  // Pops the front task and runs it under this stream's execution ownership,
  // then records its completion. Called with `lock` held and a task pending
  // that nobody runs; returns with `lock` held.
  void run_front(std::unique_lock<std::mutex>& lock);
  // Records the completion of the task with `ticket`, run under this
  // stream's execution ownership, and what it raised (empty: nothing).
  // Called with `lock` held.
  void complete(std::unique_lock<std::mutex>& lock, uint64_t ticket,
                const std::string& failure);
  // Whether the calling thread may start the front task now.
  bool can_take() const { return !executing_ && !queue_.empty(); }
  // Wakes the worker if pending tasks wait for it only because its wake-up
  // was deferred.
  void wake_deferred();

  const int device_;
  const int priority_;

  // What a push touches under the lock, together in one 128-byte block (a
  // pair of cache lines, which x86 fetches together); the submission counter
  // and what the thread running tasks writes as it completes them, each in
  // a line of its own. Every line both threads write moves between their
  // cores; perf of 1000 queued one-element adds found push() stalled on four
  // such lines (the mutex, the ring's indices, the submission counter, the
  // completion counter it read for backpressure), each missed about once
  // per task, and a quarter of the submitting thread's time there.
  alignas(128) std::mutex mutex_;
  std::atomic<Clock::rep> last_enqueue_{0};  // when the last task was queued
  // When the queue last went from empty to non-empty: how soon work came
  // after the worker went idle decides whether its next idle time spins.
  Clock::rep became_busy_ = 0;
  // Each task with its submitter's denormal mode (host/denormal_mode.h).
  struct QueuedTask {
    Task task;
    uint32_t denormals = 0;
  };
  TaskRing<QueuedTask> queue_;  // no allocation per task: see host_task.h
  // Wake-ups are system calls: signal the worker only when it sleeps, and
  // waiters only when there are any, so a busy queue runs without them.
  // Atomic for wake_deferred()'s look without the lock.
  std::atomic<bool> worker_sleeping_{false};
  bool worker_polling_ = false;  // sleeping, but checking by itself soon
  // Deferred wake-ups: set while callers wait for each task right after
  // queuing it (a loop of small synchronous ops, of .item() calls) and so
  // run them themselves, where waking the worker for each task would only
  // cost a system call, a core and a hand-off. Then a lone pending task does not
  // wake a polling worker: the next task queued behind it, a query, a
  // waiting caller, or the worker's own periodic check does; and the worker
  // does not spin. It ends when the worker finds work nobody waits for. See
  // enqueue(), wait_for() and run().
  std::atomic<bool> defer_wakes_{false};
  // Whether run_now() may run the next task: set by a wait that found the
  // caller doing its work as it queues it (see run_now), cleared by the
  // next task queued or run.
  std::atomic<bool> run_now_allowed_{false};
  // completed_ as a submitter last read it: enqueue() reads completed_ only
  // when this says the queue may be full.
  std::atomic<uint64_t> completed_seen_{0};
  std::atomic<uint64_t> ran_now_{0};  // written under mutex_

  // Written under mutex_ (so condition variables see them consistently), read
  // without it while spinning: alone in its line, which a spinning worker
  // reads, so that the lock's line stays the submitter's while it pushes.
  alignas(128) std::atomic<uint64_t> submitted_{0};

  // Written by the thread running tasks (the worker, or a waiting caller).
  alignas(128) std::atomic<uint64_t> completed_{0};
  // Some thread (the worker or a waiting caller) is running a task of this
  // stream: the others must not start one.
  std::atomic<bool> executing_{false};

  std::condition_variable work_cv_;
  std::condition_variable done_cv_;
  int sync_waiters_ = 0;  // callers asleep on done_cv_
  // Callers waiting for a task another thread runs (spinning or asleep):
  // the worker leaves them the pending tasks.
  int callers_waiting_ = 0;
  bool stopping_ = false;
  std::string error_;
  uint64_t error_ticket_ = 0;  // the ticket of the task that raised error_
  std::atomic<bool> has_error_{false};  // !error_.empty(), read without lock
  std::atomic<HostCapture*> capture_{nullptr};
  std::thread worker_;
  // TORCH_INFINI_LAUNCH_BLOCKING=1 (read when the stream is made: asked on
  // every enqueue). Last: the members above keep the places the queue's
  // timings were measured with.
  const bool launch_blocking_;
};

// An event is recorded into a stream: it completes when the stream's worker
// has run past that position (the stream's own completion counter, so an
// event and its stream never disagree), and timestamps that moment.
class HostEvent {
 public:
  HostEvent(int device, bool timing) : device_(device), timing_(timing) {}

  int device() const { return device_; }
  bool timing() const { return timing_; }

  // Never waits on a full queue (see HostStream::enqueue).
  void record(HostStream& stream);
  // Makes `stream` wait, in its queue, for the most recent record of this
  // event at the time of the call (CUDA's cudaStreamWaitEvent semantics: a
  // later record does not change what an earlier wait waits for).
  void block(HostStream& stream);
  bool query();
  // Blocks until the last record has been reached, without reporting errors.
  void wait();
  // Blocks like wait(), then reports the pending error of the recorded stream
  // if the task that raised it ran before the record (cudaEventSynchronize
  // reports the failure of the work it waited for).
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
