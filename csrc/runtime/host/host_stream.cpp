#include "runtime/host/host_stream.h"

#include <stdexcept>
#include <utility>

namespace torch_infini::runtime::host {

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

void HostStream::enqueue(Task task) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    queue_.push_back(std::move(task));
    ++submitted_;
    wake = worker_sleeping_;
  }
  if (wake) {
    work_cv_.notify_one();
  }
}

void HostStream::raise_pending_error_locked(std::unique_lock<std::mutex>& lock) {
  if (error_.empty()) {
    return;
  }
  std::string message = std::move(error_);
  error_.clear();
  lock.unlock();
  throw std::runtime_error(message);
}

void HostStream::synchronize() {
  std::unique_lock<std::mutex> lock(mutex_);
  const uint64_t target = submitted_;
  ++sync_waiters_;
  done_cv_.wait(lock, [&] { return completed_ >= target; });
  --sync_waiters_;
  raise_pending_error_locked(lock);
}

bool HostStream::query() {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool done = completed_ >= submitted_;
  if (done) {
    raise_pending_error_locked(lock);
  }
  return done;
}

void HostStream::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
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
    // Never hold the queue lock while work runs: submitters must not wait on
    // the device.
    lock.unlock();
    std::string failure;
    try {
      task();
    } catch (const std::exception& e) {
      failure = e.what();
    } catch (...) {
      failure = "unknown error in a task on the infini host runtime";
    }
    // Destroy the task (and what it captured) before reporting completion, so
    // that synchronize() really means "nothing of it is left".
    task = nullptr;
    lock.lock();
    if (!failure.empty() && error_.empty()) {
      error_ = "infini host runtime: asynchronous error on device " +
          std::to_string(device_) + ": " + failure;
    }
    ++completed_;
    if (sync_waiters_ > 0) {
      done_cv_.notify_all();
    }
  }
}

void HostEvent::record(HostStream& stream) {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    generation = ++recorded_;
  }
  stream.enqueue([self = shared_from_this(), generation] {
    const auto now = Clock::now();
    std::lock_guard<std::mutex> guard(self->mutex_);
    if (generation > self->completed_) {
      self->completed_ = generation;
      self->time_ = now;
    }
    self->cv_.notify_all();
  });
}

void HostEvent::block(HostStream& stream) {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    generation = recorded_;
  }
  if (generation == 0) {
    return;  // never recorded: nothing to wait for, as in CUDA
  }
  stream.enqueue([self = shared_from_this(), generation] {
    self->wait_for(generation);
  });
}

void HostEvent::wait_for(uint64_t generation) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return completed_ >= generation; });
}

bool HostEvent::query() {
  std::lock_guard<std::mutex> guard(mutex_);
  return completed_ >= recorded_;
}

void HostEvent::synchronize() {
  uint64_t generation = 0;
  {
    std::lock_guard<std::mutex> guard(mutex_);
    generation = recorded_;
  }
  wait_for(generation);
}

float HostEvent::elapsed_since(HostEvent& start) {
  Clock::time_point begin;
  Clock::time_point end;
  {
    std::lock_guard<std::mutex> guard(start.mutex_);
    if (start.completed_ == 0 || start.completed_ < start.recorded_) {
      throw std::runtime_error(
          "elapsed_time: the start event has not completed");
    }
    begin = start.time_;
  }
  {
    std::lock_guard<std::mutex> guard(mutex_);
    if (completed_ == 0 || completed_ < recorded_) {
      throw std::runtime_error("elapsed_time: the end event has not completed");
    }
    end = time_;
  }
  return std::chrono::duration<float, std::milli>(end - begin).count();
}

}  // namespace torch_infini::runtime::host
