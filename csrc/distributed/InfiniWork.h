#pragma once

// The Work a collective of the infini process group returns.
//
// It completes when the host collective has finished and its results have
// been queued back onto the device (on the group's communication stream);
// the `done` event marks that point in the stream. As on CUDA:
// - wait() blocks the calling thread only until the host collective is done
//   (what gloo's own wait does), then makes the caller's current stream wait
//   for `done`, so kernels queued afterwards see the results;
// - isCompleted() is true once the results are on the device;
// - getFuture() is a device-aware future: its value() and then() callbacks
//   are ordered after `done` on the consumer's streams.

#include <ATen/core/ivalue.h>
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <chrono>
#include <exception>
#include <memory>
#include <optional>
#include <vector>

namespace torch_infini::distributed {

class InfiniWork final : public c10d::Work {
 public:
  // `device` is the infini device the results live on.
  InfiniWork(int rank, c10d::OpType type, std::vector<at::Tensor> outputs,
             c10::Device device);

  bool isCompleted() override;
  bool isSuccess() const override;
  std::exception_ptr exception() const override;
  int sourceRank() const override;
  std::vector<at::Tensor> result() override;
  // Makes the current stream of the results' device wait for them.
  void synchronize() override;
  bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

  // Called by the group's completion thread with the communication stream
  // current, after the copy-backs were queued and `done` recorded after them.
  void complete(std::shared_ptr<c10::Event> done, int source_rank);
  void fail(std::exception_ptr error);

 private:
  const c10::Device device_;
  const std::vector<at::Tensor> outputs_;
  const c10::intrusive_ptr<c10::ivalue::Future> future_;
  std::shared_ptr<c10::Event> done_;  // guarded by mutex_ (Work's)
  int source_rank_ = -1;
};

}  // namespace torch_infini::distributed
