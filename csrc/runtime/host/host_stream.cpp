#include "runtime/host/host_stream.h"

#include <c10/core/AutogradState.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/impl/LocalDispatchKeySet.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <utility>

#include "runtime/device_trace.h"
#include "runtime/host/denormal_mode.h"
#include "runtime/host/host_graph.h"
#include "runtime/host/kernel_state.h"
#include "runtime/host/memory_protection.h"
#include "runtime/cache_verification.h"
#include "runtime/current_operator.h"
#include "runtime/env.h"

// OpenMP, weakly: PyTorch's libgomp provides them; with another runtime (or
// none) the workers keep OpenMP's defaults.
extern "C" {
int omp_get_max_threads(void) __attribute__((weak));
void omp_set_num_threads(int) __attribute__((weak));
}

namespace torch_infini::runtime::host {
namespace {

// Spin, then block: waking a sleeping thread costs 50-100 us on an idle
// (virtual) machine, far more than the short tasks of a typical queue, and
// the waker pays for it too (an inter-processor interrupt, about 10 us of
// the submitting thread's time here). Both the worker (for new work) and a
// synchronizing caller (for completion) spin before they sleep, as CUDA's
// default scheduling does.
// - The worker's idle spin covers the gaps a training step leaves between
//   queued calls (Python, the autograd engine, the optimizer): with 50 us
//   the worker of a llama-tiny training step slept 4x as often, and the
//   step took 7% longer.
// - A caller waiting for the task the worker runs spins briefly: on a busy
//   machine its spin takes the core the worker needs. (Beside one CPU-bound
//   process, this VM's figures moved by 2-10x between runs of one build, so
//   no measurement chose between 50 and 200 us here; the reason is the
//   mechanism.)
constexpr auto kWorkerSpin = std::chrono::microseconds(200);
constexpr auto kSpin = std::chrono::microseconds(50);
// How often a sleeping worker checks for work by itself after its stream's
// last activity, and for how many checks: a task whose wake-up was deferred
// waits at most kDeferredCheck, and an idle stream's worker soon sleeps until
// woken.
constexpr auto kDeferredCheck = std::chrono::milliseconds(1);
constexpr int kDeferredChecks = 16;

template <typename Ready>
bool spin_until(Ready ready, Clock::duration limit = kSpin) {
  const auto deadline = Clock::now() + limit;
  for (unsigned i = 0;; ++i) {
    if (ready()) {
      return true;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
    if ((i & 63) == 63 && Clock::now() > deadline) {
      return false;
    }
  }
}

// Set on every stream worker: what a worker queues never waits for space.
thread_local bool on_worker_thread = false;
// How many TaskScopes are open on this thread: a caller running tasks never
// waits for space either (a task blocked on another stream's full queue
// while this stream's execution is owned could close a cycle of waits).
thread_local int caller_task_scopes = 0;

// The state a task runs in on a caller (a waiting one, or one running it at
// once): a fresh thread's, as on the worker (runtime/host/kernel_state.h),
// counted for enqueue().
class TaskScope {
 public:
  TaskScope() { ++caller_task_scopes; }
  ~TaskScope() { --caller_task_scopes; }
  TaskScope(const TaskScope&) = delete;
  TaskScope& operator=(const TaskScope&) = delete;

 private:
  KernelThreadState state_;
};

// Runs one task; returns what it raised (empty when it succeeded). The one
// place a stream's task runs: on the worker, on a waiting caller, or on a
// caller that runs it at once (run_now).
std::string execute(c10::function_ref<void()> task) {
  try {
    task();
  } catch (const c10::Error& e) {
    return e.what_without_backtrace();
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error in a task on the infini host runtime";
  }
  return {};
}

// TORCH_INFINI_LAUNCH_BLOCKING=1 (read once).
bool launch_blocking() {
  static const bool on = env_switch("TORCH_INFINI_LAUNCH_BLOCKING", false);
  return on;
}

}  // namespace

// Intra-op threads of the kernels a stream worker runs (OpenMP's thread
// count is per thread, and at::parallel_for and MKL read the calling
// thread's). A worker runs while its submitter goes on in Python, and each
// thread that opens a parallel region has its own team of OpenMP threads,
// which spin for a while after every region: a worker with the full pool
// beside a submitter with its own oversubscribes the cores, and on two cores
// a 64x64 softmax then took milliseconds instead of microseconds. So a
// worker's kernels use the intra-op pool less one thread (the submitter's),
// at least one; kernels a waiting caller runs itself use the caller's pool,
// as CPU eager would. TORCH_INFINI_WORKER_THREADS=N sets the count.
int worker_intra_op_threads() {
  static const int threads = [] {
    const int pool = std::max(1, at::get_num_threads());
    return static_cast<int>(env_int("TORCH_INFINI_WORKER_THREADS",
                                    std::max(1, pool - 1), 1, 4096));
  }();
  return threads;
}

HostStream::HostStream(int device, int priority)
    : device_(device), priority_(priority), launch_blocking_(launch_blocking()) {
  // Read here, where a bad TORCH_INFINI_WORKER_THREADS raises to the caller.
  const int threads = worker_intra_op_threads();
  worker_ = std::thread([this, threads] {
    if (omp_set_num_threads != nullptr) {
      omp_set_num_threads(threads);
    }
    run();
  });
}

HostStream::~HostStream() {
  {
    std::lock_guard<std::mutex> guard(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_one();
  if (worker_.joinable()) {
    worker_.join();
  }
}

uint64_t HostStream::enqueue(Task task, bool may_block) {
  // Graph capture first: a captured task is recorded, not run, and not
  // traced (a traced task would hold the profiler's in-flight count
  // until the graph is destroyed).
  if (HostCapture* capture = capture_.load(std::memory_order_acquire)) {
    capture->add_task(*this, std::move(task));  // recorded, not run
    return 0;
  }
  // Profiler hook: while a profiler traces device work, a labelled task (a
  // kernel or a copy; see runtime/device_trace.h) times itself on the
  // worker. Without a profiler this is one relaxed atomic load.
  if (profiler::tracing()) {
    if (const profiler::Label* label = profiler::current_label()) {
      task = profiler::traced(*label, std::move(task));
    }
  }
  if (may_block && !on_worker_thread && caller_task_scopes == 0) {
    const uint64_t queued = submitted_.load();
    // completed_ is the running thread's line: read only when the queue may
    // be full by what was seen before (the count only grows).
    if (queued - completed_seen_.load(std::memory_order_relaxed) >=
            kMaxQueueDepth &&
        queued - (completed_seen_ = completed_.load()) >= kMaxQueueDepth) {
      // Backpressure. The caller runs pending tasks itself, with its own
      // intra-op pool as CPU eager would, until kResumeDepth are left; then
      // the worker takes the rest while the caller goes on queuing. (A
      // caller asleep here would leave a compute-bound loop that queued far
      // ahead, such as a model's forward, to the worker's smaller pool; and
      // a larger worker pool beside the caller's makes OpenMP throttle
      // every team's spinning, which slowed small kernels several-fold.)
      wait_for(queued - kResumeDepth);
    }
  }
  const uint64_t ticket = push(std::move(task));
  if (may_block && launch_blocking_ && !on_worker_thread) {
    // TORCH_INFINI_LAUNCH_BLOCKING=1, as CUDA_LAUNCH_BLOCKING=1: the work is
    // done, and its error raised, before the call returns.
    wait_for(ticket);
    raise_error(ticket);
  }
  return ticket;
}

uint64_t HostStream::push(Task&& task) {
  bool wake = false;
  uint64_t ticket = 0;
  const uint32_t denormals = denormal_mode();
  {
    std::unique_lock<std::mutex> lock(mutex_);
    const Clock::rep now = Clock::now().time_since_epoch().count();
    if (queue_.empty()) {
      became_busy_ = now;
    }
    QueuedTask& slot = queue_.push_back();
    slot.task = std::move(task);
    slot.denormals = denormals;
    ticket = ++submitted_;
    last_enqueue_ = now;
    if (run_now_allowed_.load(std::memory_order_relaxed) &&
        current_operator() == nullptr) {
      // Queued by the program: the next call waits its turn. (A task an
      // operator queues and waits for inside its call, such as the cache
      // verification mode's copies, leaves the program's wait standing;
      // run_now still finds the queue drained before it runs anything.)
      run_now_allowed_.store(false, std::memory_order_relaxed);
    }
    // Deferred: a lone task is likely the one its submitter is about to wait
    // for (and run itself); a second one behind it means work to overlap.
    // Only a polling worker may be left asleep (it checks by itself soon).
    wake = worker_sleeping_ &&
        !(defer_wakes_ && worker_polling_ && queue_.size() == 1);
  }
  if (wake) {
    work_cv_.notify_one();
  }
  return ticket;
}

void HostStream::enqueue_release(Task task) {
  push(std::move(task));
}

bool HostStream::reached(uint64_t ticket) {
  if (completed_.load() >= ticket) {
    return true;
  }
  wake_deferred();  // an event polled with query() must see progress
  return false;
}

void HostStream::wait_for(uint64_t ticket) {
  if (ticket == submitted_.load() && ticket <= completed_.load() + 1) {
    // Waiting for a lone task, the last one queued (a small synchronous op,
    // an .item()), even one already run. Hints, so set without the lock.
    if (!run_now_allowed_.load(std::memory_order_relaxed) &&
        current_operator() == nullptr) {
      // The program's wait: the next task may run at once (run_now). Not
      // a wait inside an operator's call (a first call's direct run, a
      // data-dependent operator, the cache verification mode's copies):
      // the runtime's own waits do not say how the program waits, and the
      // verification mode must not change which way calls run. (A wait
      // for several tasks is not enough either: the first call after it
      // may be large, and running it here would keep the caller from
      // queuing the calls after it while the worker computes;
      // benchmarks/run.py could not tell the two rules apart on the MLP
      // forward and overlap cases, so the stricter one stays.)
      run_now_allowed_ = true;
    }
    if (!defer_wakes_.load(std::memory_order_relaxed) &&
        Clock::now().time_since_epoch().count() - last_enqueue_.load() <
            std::chrono::duration_cast<Clock::duration>(kSpin).count()) {
      // And right after queuing it: the next such task is better run here
      // than handed to the worker. (A task waited for long after it was
      // queued, such as a copy on a side stream, is work to overlap.)
      defer_wakes_ = true;
    }
  }
  if (completed_.load() >= ticket) {
    return;
  }
  std::optional<TaskScope> scope;  // opened before the first task run here
  std::unique_lock<std::mutex> lock(mutex_);
  while (completed_.load() < ticket) {
    if (can_take()) {
      // Nobody runs the pending tasks (the worker sleeps, or has not got to
      // them yet): run them here, rather than pay a hand-off and a wake-up.
      if (!scope && !on_worker_thread) {
        scope.emplace();
      }
      run_front(lock);
      continue;
    }
    // Another thread runs a task of this stream. The worker hands the rest
    // over when it has finished it (see run()), so that they run here, with
    // this thread's intra-op pool, as in CPU eager: wait for that (spinning
    // briefly first), or for the ticket.
    ++callers_waiting_;
    lock.unlock();
    const bool done = spin_until([&] {
      return completed_.load() >= ticket || !executing_.load();
    });
    lock.lock();
    if (!done) {
      ++sync_waiters_;
      done_cv_.wait(lock, [&] { return completed_ >= ticket || can_take(); });
      --sync_waiters_;
    }
    --callers_waiting_;
  }
  // Tasks queued after `ticket` (by other threads) are the worker's again.
  const bool wake = worker_sleeping_ && !queue_.empty() && !executing_;
  if (wake) {
    defer_wakes_ = false;  // not this caller's tasks: the worker's to run now
  }
  lock.unlock();
  if (wake) {
    work_cv_.notify_one();
  }
}

void HostStream::wait_idle() {
  wait_for(submitted_.load());
}

std::string HostStream::take_error(uint64_t ticket) {
  if (!has_error_.load()) {
    return {};  // the common case, without the lock
  }
  if (recomputing_hit()) {
    return {};  // the program's error, left for its own next wait
  }
  std::lock_guard<std::mutex> guard(mutex_);
  if (error_.empty() || error_ticket_ > ticket) {
    return {};
  }
  std::string message = std::move(error_);
  error_.clear();
  error_ticket_ = 0;
  has_error_ = false;
  return message;
}

void HostStream::raise_error(uint64_t ticket) {
  std::string message = take_error(ticket);
  if (!message.empty()) {
    throw std::runtime_error(message);
  }
}

void HostStream::synchronize() {
  wait_idle();
  raise_error();
}

bool HostStream::query() {
  const bool done = completed_.load() >= submitted_.load();
  if (done) {
    raise_error();
  } else {
    wake_deferred();  // a caller polling query() must see progress
  }
  return done;
}

void HostStream::wake_deferred() {
  // A look without the lock first: an awake worker takes the pending work by
  // itself, and taking the lock here met the worker taking it to run that
  // work (a loop of event record + query slept and woke on the lock's futex
  // every few calls). A worker that falls asleep just after this look still
  // takes a lone deferred task at its next check (kDeferredCheck).
  if (!worker_sleeping_.load(std::memory_order_relaxed)) {
    return;
  }
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    wake = worker_sleeping_ && can_take();
    if (wake) {
      defer_wakes_ = false;  // someone polls: the work is wanted now
    }
  }
  if (wake) {
    work_cv_.notify_one();
  }
}

void HostStream::run_front(std::unique_lock<std::mutex>& lock) {
  Task task = std::move(queue_.front().task);
  const uint32_t denormals = queue_.front().denormals;
  queue_.pop_front();
  // Tasks complete in order, one at a time: the front one is the next ticket.
  const uint64_t ticket = completed_.load() + 1;
  executing_ = true;
  // Never hold the queue lock while work runs: submitters must not wait on
  // the device.
  lock.unlock();
  std::string failure;
  {
    DenormalModeGuard as_submitted(denormals);
    DeviceMemoryAccess runtime_work;  // the mode's one door: see memory_protection.h
    failure = execute(task);
  }
  // Destroy the task (and what it captured) before reporting completion, so
  // that synchronize() really means "nothing of it is left".
  task = nullptr;
  lock.lock();
  complete(lock, ticket, failure);
}

void HostStream::complete(std::unique_lock<std::mutex>& /*lock*/,
                          uint64_t ticket, const std::string& failure) {
  // The error before the completion: query() and event queries read
  // completed_ and has_error_ without the lock, and a caller that sees the
  // task completed must see its error (it once saw the completion alone,
  // and the error went unreported).
  if (!failure.empty() && error_.empty()) {
    error_ = "infini host runtime: asynchronous error on device " +
        std::to_string(device_) + ": " + failure;
    error_ticket_ = ticket;
    has_error_ = true;
  }
  executing_ = false;
  ++completed_;
  if (sync_waiters_ > 0) {
    done_cv_.notify_all();
  }
}

bool HostStream::run_now(c10::function_ref<void()> work) {
  // The look without the lock first: the common answer, for work queued
  // ahead, is no.
  if (!run_now_allowed_.load(std::memory_order_relaxed) || on_worker_thread ||
      caller_task_scopes > 0 || launch_blocking_ ||
      capture_.load(std::memory_order_acquire) != nullptr ||
      profiler::tracing()) {
    return false;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  if (!run_now_allowed_ || !queue_.empty() || executing_ ||
      capture_.load() != nullptr) {
    return false;
  }
  run_now_allowed_ = false;
  ran_now_.store(ran_now_.load(std::memory_order_relaxed) + 1,
                 std::memory_order_relaxed);
  // Execution ownership, as run_front takes it: the worker and waiting
  // callers start nothing of this stream until complete().
  executing_ = true;
  const uint64_t ticket = ++submitted_;
  last_enqueue_ = Clock::now().time_since_epoch().count();
  lock.unlock();
  std::string failure;
  {
    TaskScope scope;
    DeviceMemoryAccess runtime_work;  // the mode's one door
    failure = execute(work);
  }
  lock.lock();
  complete(lock, ticket, failure);
  // Tasks other threads queued meanwhile are the worker's.
  const bool wake = worker_sleeping_ && can_take();
  lock.unlock();
  if (wake) {
    work_cv_.notify_one();
  }
  return true;
}

void HostStream::run() {
  on_worker_thread = true;
  std::unique_lock<std::mutex> lock(mutex_);
  // Stopping: once drained (a caller may still be running the last task of a
  // stream destroyed under it, which is the caller's bug). While a caller
  // waits for this stream, the worker leaves it the pending tasks (see
  // wait_for()).
  const auto ready = [&] {
    return (can_take() && callers_waiting_ == 0) ||
        (stopping_ && queue_.empty());
  };
  // The idle spin pays off only while work keeps arriving within it (a loop
  // queuing small ops); when it runs out it only takes a core from other
  // threads, on a busy machine from the submitter itself. So the worker
  // spins only after an idle gap shorter than kWorkerSpin, not again after a
  // spin that ran out (until a short gap shows work arriving quickly again),
  // and not while callers wait for their tasks one at a time (defer_wakes_).
  bool spin = true;
  for (;;) {
    if (!ready()) {
      const auto idle_since = Clock::now();
      if (spin && !defer_wakes_) {
        lock.unlock();
        spin = spin_until(
            [&] {
              return submitted_.load() > completed_.load() &&
                  !executing_.load();
            },
            kWorkerSpin);
        lock.lock();
      }
      // Sleep. For a while after the stream's last activity the worker also
      // checks by itself every kDeferredCheck, taking a lone task whose
      // wake-up was deferred once it has waited a whole check (so it waits at
      // most two); after kDeferredChecks checks in a row with nothing run on
      // the stream, it sleeps until woken.
      uint64_t queued_at_last_check = submitted_.load();
      const auto wanted = [&] {
        return ready() &&
            (!defer_wakes_ || queue_.size() > 1 || stopping_ ||
             completed_.load() < queued_at_last_check);
      };
      worker_sleeping_ = true;
      worker_polling_ = true;
      int empty_checks = 0;
      while (!wanted()) {
        if (empty_checks >= kDeferredChecks) {
          worker_polling_ = false;  // from now on enqueue() always wakes it
          defer_wakes_ = false;
          work_cv_.wait(lock, ready);
          break;
        }
        const uint64_t done = completed_.load();
        if (!work_cv_.wait_for(lock, kDeferredCheck, wanted)) {
          empty_checks = completed_.load() == done ? empty_checks + 1 : 0;
          queued_at_last_check = submitted_.load();
        }
      }
      worker_sleeping_ = false;
      worker_polling_ = false;
      // Measured to the work's arrival, not to this wake-up: the wake-up's
      // own latency (often longer than the spin on a virtual machine) would
      // otherwise keep every later idle time from spinning.
      spin = became_busy_ - idle_since.time_since_epoch().count() <
          std::chrono::duration_cast<Clock::duration>(kWorkerSpin).count();
      if (can_take()) {
        // Woken for work nobody waits for (a second task, or a lone one
        // left for a whole check): work to overlap, wake-ups are due again.
        defer_wakes_ = false;
      }
    }
    if (stopping_ && queue_.empty()) {
      return;  // stopping and drained
    }
    if (!ready()) {
      continue;
    }
    run_front(lock);
  }
}

std::shared_ptr<HostEvent::Mark> HostEvent::last_mark() {
  std::lock_guard<std::mutex> guard(mutex_);
  return last_;
}

void HostEvent::record(HostStream& stream) {
  auto mark = std::make_shared<Mark>();
  mark->stream = &stream;
  // The worker writes the time before it advances the stream's counter, and
  // readers only read it after seeing the counter reach the ticket.
  mark->ticket = stream.enqueue([mark] { mark->time = Clock::now(); },
                                /*may_block=*/false);
  std::lock_guard<std::mutex> guard(mutex_);
  last_ = std::move(mark);
}

void HostEvent::block(HostStream& stream) {
  std::shared_ptr<Mark> mark = last_mark();
  if (mark == nullptr || mark->stream == &stream) {
    return;  // never recorded, or already ordered by the queue itself
  }
  // Never waits on a full queue: PyTorch's torch.Event.wait and
  // torch.Stream.wait_event call this with the GIL held, and a thread
  // running this stream's tasks may need the GIL to finish one (releasing a
  // captured tensor that has a Python object takes it, TensorImpl::
  // decref_pyobject): waiting here for that thread would deadlock. A wait
  // is a small task; the calls that queue real work still apply the
  // backpressure.
  stream.enqueue([mark] { mark->stream->wait_for(mark->ticket); },
                 /*may_block=*/false);
}

bool HostEvent::query() {
  std::shared_ptr<Mark> mark = last_mark();
  return mark == nullptr || mark->stream->reached(mark->ticket);
}

void HostEvent::wait() {
  std::shared_ptr<Mark> mark = last_mark();
  if (mark != nullptr) {
    mark->stream->wait_for(mark->ticket);
  }
}

void HostEvent::synchronize() {
  std::shared_ptr<Mark> mark = last_mark();
  if (mark != nullptr) {
    mark->stream->wait_for(mark->ticket);
    mark->stream->raise_error(mark->ticket);
  }
}

float HostEvent::elapsed_since(HostEvent& start) {
  std::shared_ptr<Mark> begin = start.last_mark();
  std::shared_ptr<Mark> end = last_mark();
  if (begin == nullptr || !begin->stream->reached(begin->ticket)) {
    throw std::runtime_error("elapsed_time: the start event has not completed");
  }
  if (end == nullptr || !end->stream->reached(end->ticket)) {
    throw std::runtime_error("elapsed_time: the end event has not completed");
  }
  return std::chrono::duration<float, std::milli>(end->time - begin->time)
      .count();
}

}  // namespace torch_infini::runtime::host
