#pragma once

// The c10d backend of the infini device ("infini" in torch.distributed).
//
// Collectives on infini tensors run on a host c10d backend (gloo, created by
// torch_infini.distributed) over pinned staging buffers, or in place where
// the device memory is host-addressable, stream-ordered as on a device (see
// StagedCollective.h). Collectives whose tensors are all on
// the CPU go to the host backend unchanged, so one "infini" group also
// serves CPU tensors and barrier()/object collectives.
//
// ReduceOps: those of the host backend; PREMUL_SUM is computed here (the
// inputs are scaled on the host before a SUM), as gloo has none. Bitwise ops
// need integer tensors and AVG floating ones: both are checked at the call.

#include <torch/csrc/distributed/c10d/Backend.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/distributed/c10d/Store.hpp>

#include "distributed/InfiniCCL.h"
#include "distributed/StagedCollective.h"

namespace torch_infini::distributed {

class ProcessGroupInfini final : public c10d::Backend {
 public:
  // `force_staging`: copy through pinned host buffers even where the device
  // memory is host-addressable (where it is, gloo otherwise works in place).
  // `store`: where InfiniCCL's unique id is exchanged, in builds with
  // InfiniCCL (null: gloo only).
  ProcessGroupInfini(c10::intrusive_ptr<c10d::Backend> host, int rank, int size,
                     bool force_staging,
                     c10::intrusive_ptr<c10d::Store> store = {});
  ~ProcessGroupInfini() override;

  const std::string getBackendName() const override { return "infini"; }
  // Whether infini data goes through pinned staging copies (else gloo works
  // in place on host aliases of the device memory, where it can).
  bool stages() const { return !direct_; }
  // Whether collectives run on InfiniCCL where it implements them, and if
  // not, why ("" when they do).
  bool uses_infini_ccl() const { return ccl_ != nullptr; }
  const std::string& infini_ccl_status() const { return ccl_status_; }
  bool supportsCoalescing() const override { return true; }
  void startCoalescing() override;
  c10::intrusive_ptr<c10d::Work> endCoalescing() override;

  c10::intrusive_ptr<c10d::Work> broadcast(
      std::vector<at::Tensor>& tensors, const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors,
      const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(
      std::vector<at::Tensor>& tensors, const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather_into_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> gather(
      std::vector<std::vector<at::Tensor>>& outputs,
      std::vector<at::Tensor>& inputs, const c10d::GatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(
      std::vector<at::Tensor>& outputs,
      std::vector<std::vector<at::Tensor>>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter_tensor_coalesced(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
      std::vector<int64_t>& input_splits,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(
      std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
      const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> send(
      std::vector<at::Tensor>& tensors, int dst_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(
      std::vector<at::Tensor>& tensors, int src_rank, int tag) override;
  c10::intrusive_ptr<c10d::Work> recvAnysource(
      std::vector<at::Tensor>& tensors, int tag) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;

  void setSequenceNumberForGroup() override;
  uint64_t getSequenceNumberForGroup() override;
  void setTimeout(std::chrono::milliseconds timeout) override;
  void shutdown() override;

 private:
  // The infini device all of `tensors` are on (raises, naming `op`, unless
  // they all are on one), or nullopt when they are all CPU tensors.
  std::optional<c10::Device> device_of(const char* op,
                                       const std::vector<at::Tensor>& tensors) const;
  // Records `work` in the coalesced group while coalescing.
  c10::intrusive_ptr<c10d::Work> track(c10::intrusive_ptr<c10d::Work> work);
  // A job for a collective over `tensors` on `device`; in place on the device
  // memory where possible (see new_job in the .cpp).
  std::shared_ptr<StagedJob> new_job(c10::Device device,
                                     const std::vector<at::Tensor>& tensors,
                                     bool scales_inputs = false) const;
  c10::intrusive_ptr<c10d::Work> submit(std::shared_ptr<StagedJob> job,
                                        c10d::OpType type,
                                        std::vector<at::Tensor> results);
  c10::Stream comm_stream(c10::DeviceIndex device);

  c10::intrusive_ptr<c10d::Backend> host_;
  const bool direct_;
  std::unique_ptr<CclCommunicator> ccl_;  // null: every collective on gloo
  std::string ccl_status_;  // host collectives in place on host-addressable device memory

  std::mutex streams_mutex_;
  std::vector<std::optional<c10::Stream>> comm_streams_;

  std::mutex coalescing_mutex_;
  bool coalescing_ = false;
  std::vector<c10::intrusive_ptr<c10d::Work>> coalesced_;

  // Last: its threads stop before the members they use are destroyed.
  std::unique_ptr<StagedQueue> queue_;
};

// For torch_infini.distributed's backend creator.
c10::intrusive_ptr<c10d::Backend> create_process_group(
    c10::intrusive_ptr<c10d::Backend> host, int rank, int size, bool force_staging,
    c10::intrusive_ptr<c10d::Store> store = {});

}  // namespace torch_infini::distributed
