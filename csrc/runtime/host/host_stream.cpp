#include "runtime/host/host_stream.h"

#include "runtime/host/host_graph.h"

#include <c10/util/Exception.h>

#include <stdexcept>
#include <utility>

namespace torch_infini::runtime::host {
namespace {

// Spin, then block: waking a sleeping thread costs 50-100 us on an idle
// (virtual) machine, far more than the short tasks of a typical queue. Both
// the worker (for new work) and a synchronizing caller (for completion) spin
// briefly before they sleep, as CUDA's default scheduling does.
constexpr auto kSpin = std::chrono::microseconds(50);

template <typename Ready>
bool spin_until(Ready ready) {
  const auto deadline = Clock::now() + kSpin;
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

}  // namespace

HostStream::HostStream(int device, int priority)
    : device_(device), priority_(priority), worker_([this] { run(); }) {}

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
  if (HostCapture* capture = capture_.load(std::memory_order_acquire)) {
    capture->add_task(*this, std::move(task));  // recorded, not run
    return 0;
  }
  bool wake = false;
  uint64_t ticket = 0;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (may_block && !on_worker_thread && queue_.size() >= kMaxQueueDepth) {
      ++space_waiters_;
      space_cv_.wait(lock, [&] { return queue_.size() <= kResumeDepth; });
      --space_waiters_;
    }
    queue_.push_back(std::move(task));
    ticket = ++submitted_;
    wake = worker_sleeping_;
  }
  if (wake) {
    work_cv_.notify_one();
  }
  return ticket;
}

bool HostStream::reached(uint64_t ticket) {
  return completed_.load() >= ticket;
}

void HostStream::wait_for(uint64_t ticket) {
  if (spin_until([&] { return completed_.load() >= ticket; })) {
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  ++sync_waiters_;
  done_cv_.wait(lock, [&] { return completed_ >= ticket; });
  --sync_waiters_;
}

void HostStream::wait_idle() {
  wait_for(submitted_.load());
}

std::string HostStream::take_error(uint64_t ticket) {
  std::lock_guard<std::mutex> guard(mutex_);
  if (error_.empty() || error_ticket_ > ticket) {
    return {};
  }
  std::string message = std::move(error_);
  error_.clear();
  error_ticket_ = 0;
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
  }
  return done;
}

void HostStream::run() {
  on_worker_thread = true;
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t taken = 0;  // tasks this worker has popped
  for (;;) {
    if (queue_.empty() && !stopping_) {
      lock.unlock();
      spin_until([&] { return submitted_.load() > taken; });
      lock.lock();
    }
    if (queue_.empty() && !stopping_) {
      worker_sleeping_ = true;
      work_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      worker_sleeping_ = false;
    }
    if (queue_.empty()) {
      return;  // stopping and drained
    }
    Task task = std::move(queue_.front());
    queue_.pop_front();
    ++taken;
    if (space_waiters_ > 0 && queue_.size() <= kResumeDepth) {
      space_cv_.notify_all();
    }
    // Never hold the queue lock while work runs: submitters must not wait on
    // the device.
    lock.unlock();
    std::string failure;
    try {
      task();
    } catch (const c10::Error& e) {
      failure = e.what_without_backtrace();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown error in a task on the infini host runtime";
    }
    // Destroy the task (and what it captured) before reporting completion, so
    // that synchronize() really means "nothing of it is left".
    task = nullptr;
    lock.lock();
    ++completed_;
    if (!failure.empty() && error_.empty()) {
      error_ = "infini host runtime: asynchronous error on device " +
          std::to_string(device_) + ": " + failure;
      error_ticket_ = taken;
    }
    if (sync_waiters_ > 0) {
      done_cv_.notify_all();
    }
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
  stream.enqueue([mark] { mark->stream->wait_for(mark->ticket); });
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
