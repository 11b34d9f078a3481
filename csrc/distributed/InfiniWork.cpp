#include "distributed/InfiniWork.h"

#include <ATen/core/jit_type.h>
#include <c10/core/DeviceGuard.h>

#include <mutex>
#include <utility>

#include "core/InfiniStream.h"

namespace torch_infini::distributed {

InfiniWork::InfiniWork(int rank, c10d::OpType type,
                       std::vector<at::Tensor> outputs, c10::Device device)
    : c10d::Work(rank, type),
      device_(device),
      outputs_(std::move(outputs)),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()),
          std::vector<c10::Device>{device})) {}

bool InfiniWork::isCompleted() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!completed_) {
    return false;
  }
  return exception_ || !done_ || done_->query();
}

bool InfiniWork::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return !exception_;
}

std::exception_ptr InfiniWork::exception() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return exception_;
}

int InfiniWork::sourceRank() const {
  std::lock_guard<std::mutex> lock(mutex_);
  TORCH_CHECK(completed_, "sourceRank() of an infini recv: the work has not completed; call wait() first");
  return source_rank_;
}

std::vector<at::Tensor> InfiniWork::result() {
  return outputs_;
}

void InfiniWork::synchronize() {
  std::shared_ptr<c10::Event> done;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done = done_;
  }
  if (done) {
    done->block(current_stream(device_.index()));
  }
}

bool InfiniWork::wait(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    if (timeout == kNoTimeout) {
      cv_.wait(lock, [&] { return completed_; });
    } else if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      TORCH_CHECK(false, "infini process group: ", c10d::opTypeToString(opType_),
                  " did not complete within ", timeout.count(), " ms");
    }
    if (exception_) {
      std::rethrow_exception(exception_);
    }
  }
  synchronize();
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> InfiniWork::getFuture() {
  return future_;
}

void InfiniWork::complete(std::shared_ptr<c10::Event> done, int source_rank) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    done_ = std::move(done);
    source_rank_ = source_rank;
  }
  finish();
  // With the communication stream current, so the future's events are
  // recorded after the copy-backs.
  future_->markCompleted(c10::IValue(outputs_));
}

void InfiniWork::fail(std::exception_ptr error) {
  finish(error);
  future_->setError(error);
}

}  // namespace torch_infini::distributed
