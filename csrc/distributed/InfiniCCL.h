#pragma once

// InfiniCCL (INFINI_CCL_PREFIX at build time) under the infini c10d backend.
//
// The communicator is created from InfiniCCL's unique id, which rank 0 makes
// and the others read through the c10d Store. Collectives run on it where
// its backend implements them, and on the host backend (gloo staging)
// otherwise. At InfiniCCL 1f3e24a only its NCCL and MCCL backends implement
// GetUniqueId, CommInitRank and AllReduce; its MPI backend (the CPU one)
// creates communicators from MPI_COMM_WORLD only (CommInitAll, under
// mpirun), so it cannot join a group made from a Store: every collective
// then stays on gloo, and `status()` says why.

#include <ATen/core/Tensor.h>
#include <c10/core/Stream.h>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include <memory>
#include <string>

namespace torch_infini::distributed {

class CclCommunicator {
 public:
  // Whether this build has InfiniCCL.
  static bool compiled();

  // The communicator of `rank` among `size`, from a unique id exchanged
  // through `store` under `prefix`; null where InfiniCCL is not compiled in
  // or cannot create one, `why` then saying what happened (every rank learns
  // of rank 0's failure through the store, so none waits forever).
  static std::unique_ptr<CclCommunicator> create(
      const c10::intrusive_ptr<c10d::Store>& store, const std::string& prefix,
      int rank, int size, std::string* why);

  ~CclCommunicator();
  CclCommunicator(const CclCommunicator&) = delete;
  CclCommunicator& operator=(const CclCommunicator&) = delete;

  // Whether all_reduce runs `t` with `op` (one dense tensor of a dtype and
  // reduction InfiniCCL has).
  static bool all_reduce_serves(const at::Tensor& t, const c10d::ReduceOp& op);
  // In place, queued on `stream` (the tensor's current stream).
  void all_reduce(const at::Tensor& t, const c10d::ReduceOp& op,
                  const c10::Stream& stream);

 private:
  explicit CclCommunicator(void* comm) : comm_(comm) {}
  void* comm_;  // infinicclComm_t
};

}  // namespace torch_infini::distributed
