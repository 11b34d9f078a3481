#include "distributed/ProcessGroupInfini.h"

#include <c10/util/Exception.h>

#include <utility>

#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"
#include "core/TorchVersion.h"
#include "runtime/runtime.h"

namespace torch_infini::distributed {
namespace {

using c10d::OpType;
using c10d::ReduceOp;
#if TORCH_INFINI_TORCH_AT_LEAST(2, 13)
using c10d::PreMulSumSupplement;
#else
// PyTorch 2.13 renamed NCCLPreMulSumSupplement (kept as an alias) to
// PreMulSumSupplement.
using PreMulSumSupplement = c10d::NCCLPreMulSumSupplement;
#endif
using Work = c10::intrusive_ptr<c10d::Work>;

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> out;
  for (const auto& list : lists) {
    out.insert(out.end(), list.begin(), list.end());
  }
  return out;
}

std::vector<at::Tensor> concat(std::vector<at::Tensor> a, const std::vector<at::Tensor>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

const char* reduce_op_name(ReduceOp::RedOpType op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
    case ReduceOp::BAND: return "BAND";
    case ReduceOp::BOR: return "BOR";
    case ReduceOp::BXOR: return "BXOR";
    case ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNUSED";
  }
}

// How a reduction runs on the host backend: the op it computes there and,
// for PREMUL_SUM, the factor the staged inputs are scaled by first.
struct HostReduction {
  ReduceOp op;
  std::optional<double> factor;
  at::Tensor factor_tensor;  // a 1-element tensor factor (staged if on device)

  // Whether prepare() changes the inputs (they are then always staged).
  bool scales() const { return factor.has_value() || factor_tensor.defined(); }

  // Scales the staged inputs (issuer thread, inputs on the host).
  void prepare(const std::vector<at::Tensor>& host_inputs) const {
    if (factor) {
      for (const auto& t : host_inputs) {
        t.mul_(*factor);
      }
    } else if (factor_tensor.defined()) {
      const at::Tensor f = factor_tensor.reshape({});
      for (const auto& t : host_inputs) {
        t.mul_(f);
      }
    }
  }
};

// Checked at the call, where gloo would only fail later on its own thread.
HostReduction host_reduction(const char* op_name, const ReduceOp& op,
                             const std::vector<at::Tensor>& tensors) {
  for (const auto& t : tensors) {
    const bool integral = c10::isIntegralType(t.scalar_type(), /*includeBool=*/true);
    switch (op.op_) {
      case ReduceOp::BAND:
      case ReduceOp::BOR:
      case ReduceOp::BXOR:
        TORCH_CHECK(integral, op_name, " on infini: ReduceOp.", reduce_op_name(op.op_),
                    " needs integer tensors, got ", t.scalar_type());
        break;
      case ReduceOp::AVG:
        TORCH_CHECK(!integral, op_name, " on infini: ReduceOp.AVG of ", t.scalar_type(),
                    " tensors is not supported (the average is not representable in "
                    "the dtype); reduce with ReduceOp.SUM and divide");
        break;
      case ReduceOp::SUM:
      case ReduceOp::PRODUCT:
      case ReduceOp::MIN:
      case ReduceOp::MAX:
      case ReduceOp::PREMUL_SUM:
        break;
      default:
        TORCH_CHECK(false, op_name, " on infini: unsupported ReduceOp ",
                    static_cast<int>(op.op_));
    }
  }
  HostReduction r{op, std::nullopt, {}};
  if (op.op_ == ReduceOp::PREMUL_SUM) {
    const auto* supplement =
        dynamic_cast<const PreMulSumSupplement*>(op.supplement_.get());
    TORCH_CHECK(supplement != nullptr, op_name,
                " on infini: ReduceOp.PREMUL_SUM without its factor");
    if (supplement->tensor_factor.defined()) {
      const at::Tensor& f = supplement->tensor_factor;
      // Staged on the current stream, like the inputs it scales.
      r.factor_tensor = f.device().type() == kInfini ? StagedJob::stage_in(f) : f.cpu();
    } else {
      r.factor = supplement->double_factor;
    }
    r.op = ReduceOp(ReduceOp::SUM);
  }
  return r;
}

// The host stand-ins of a collective's tensors: inputs copied in (or
// aliased), outputs copied back after the collective (StagedJob).
using Stage = at::Tensor (StagedJob::*)(const at::Tensor&);

std::vector<at::Tensor> staged(StagedJob& job, Stage stage,
                               const std::vector<at::Tensor>& ts) {
  std::vector<at::Tensor> host;
  host.reserve(ts.size());
  for (const auto& t : ts) {
    host.push_back((job.*stage)(t));
  }
  return host;
}

std::vector<std::vector<at::Tensor>> staged(
    StagedJob& job, Stage stage, const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<std::vector<at::Tensor>> host;
  host.reserve(lists.size());
  for (const auto& list : lists) {
    host.push_back(staged(job, stage, list));
  }
  return host;
}

template <typename Tensors>
auto staged_inputs(StagedJob& job, const Tensors& ts) {
  return staged(job, &StagedJob::input, ts);
}

template <typename Tensors>
auto staged_outputs(StagedJob& job, const Tensors& ts) {
  return staged(job, &StagedJob::output, ts);
}

template <typename Options>
Options with_host_reduction(Options opts, const HostReduction& r) {
  opts.reduceOp = r.op;
  return opts;
}

}  // namespace

ProcessGroupInfini::ProcessGroupInfini(c10::intrusive_ptr<c10d::Backend> host,
                                       int rank, int size, bool force_staging,
                                       c10::intrusive_ptr<c10d::Store> store)
    : c10d::Backend(rank, size),
      host_(std::move(host)),
      direct_(!force_staging &&
              runtime::provider().capabilities().host_addressable &&
              !runtime::provider().capabilities().protected_memory),
      comm_streams_(static_cast<size_t>(device_count())),
      queue_(std::make_unique<StagedQueue>()) {
  TORCH_CHECK(host_, "infini process group: no host backend");
  if (!CclCommunicator::compiled()) {
    ccl_status_ = "this build has no InfiniCCL (build with INFINI_CCL_PREFIX set)";
  } else if (!store) {
    ccl_status_ = "no c10d Store to exchange InfiniCCL's unique id through";
  } else {
    // Every rank of the group reaches here (the backend is created on each).
    ccl_ = CclCommunicator::create(store, "infini", rank, size, &ccl_status_);
  }
}

ProcessGroupInfini::~ProcessGroupInfini() {
  queue_->shutdown();
}

c10::Stream ProcessGroupInfini::comm_stream(c10::DeviceIndex device) {
  std::lock_guard<std::mutex> lock(streams_mutex_);
  auto& slot = comm_streams_.at(static_cast<size_t>(device));
  if (!slot) {
    slot = stream_from_pool(kHighestStreamPriority, device);
  }
  return *slot;
}

std::optional<c10::Device> ProcessGroupInfini::device_of(
    const char* op, const std::vector<at::Tensor>& tensors) const {
  std::optional<c10::Device> device;
  bool any_cpu = false;
  for (const auto& t : tensors) {
    TORCH_CHECK(t.defined(), op, " on infini: undefined tensor");
    if (t.device().is_cpu()) {
      any_cpu = true;
      continue;
    }
    TORCH_CHECK(t.device().type() == kInfini, op,
                " on the infini process group: tensors must be on infini or the CPU, got ",
                t.device());
    TORCH_CHECK(!device || *device == t.device(), op,
                " on infini: all tensors must be on one device, got ", *device,
                " and ", t.device());
    TORCH_CHECK(!t.is_sparse(), op, " on infini: sparse tensors are not supported");
    device = t.device();
  }
  TORCH_CHECK(!(device && any_cpu), op,
              " on infini: tensors must all be on the CPU or all on ", *device,
              ", got a mix");
  return device;
}

Work ProcessGroupInfini::track(Work work) {
  std::lock_guard<std::mutex> lock(coalescing_mutex_);
  if (coalescing_) {
    coalesced_.push_back(work);
  }
  return work;
}

Work ProcessGroupInfini::submit(std::shared_ptr<StagedJob> job, OpType type,
                                std::vector<at::Tensor> results) {
  job->work = c10::make_intrusive<InfiniWork>(rank_, type, std::move(results), job->device);
  job->comm_stream = comm_stream(job->device.index());
  Work work = track(job->work);
  queue_->submit(std::move(job));
  return work;
}

void ProcessGroupInfini::startCoalescing() {
  std::lock_guard<std::mutex> lock(coalescing_mutex_);
  TORCH_CHECK(!coalescing_, "infini process group: startCoalescing() called twice");
  coalescing_ = true;
  coalesced_.clear();
}

Work ProcessGroupInfini::endCoalescing() {
  std::vector<Work> members;
  {
    std::lock_guard<std::mutex> lock(coalescing_mutex_);
    TORCH_CHECK(coalescing_, "infini process group: endCoalescing() without startCoalescing()");
    coalescing_ = false;
    members.swap(coalesced_);
  }
  // Completes after every member: the staged ones complete before it (the
  // completer runs jobs in order), the completer waits for the host ones.
  auto marker = std::make_shared<StagedJob>(c10::Device(kInfini, current_device()), direct_);
  marker->members = std::move(members);
  std::vector<at::Tensor> results;
  for (const auto& m : marker->members) {
    if (auto* staged = dynamic_cast<InfiniWork*>(m.get())) {
      auto r = staged->result();
      results.insert(results.end(), r.begin(), r.end());
    }
  }
  marker->work = c10::make_intrusive<InfiniWork>(rank_, OpType::COALESCED,
                                                 std::move(results), marker->device);
  marker->comm_stream = comm_stream(marker->device.index());
  Work work = marker->work;
  queue_->submit(std::move(marker));
  return work;
}

std::shared_ptr<StagedJob> ProcessGroupInfini::new_job(
    c10::Device device, const std::vector<at::Tensor>& tensors, bool scales_inputs) const {
  // In place on the device memory where the host can address it, unless a
  // tensor is not contiguous (gloo wants dense buffers) or the inputs are
  // scaled first (PREMUL_SUM must not change the caller's inputs).
  bool direct = direct_ && !scales_inputs;
  for (const auto& t : tensors) {
    direct = direct && t.is_contiguous();
  }
  return std::make_shared<StagedJob>(device, direct);
}

Work ProcessGroupInfini::broadcast(std::vector<at::Tensor>& tensors,
                                   const c10d::BroadcastOptions& opts) {
  auto device = device_of("broadcast", tensors);
  if (!device) {
    return track(host_->broadcast(tensors, opts));
  }
  auto job = new_job(*device, tensors);
  const bool root = opts.rootRank == rank_;
  std::vector<at::Tensor> host;
  for (size_t i = 0; i < tensors.size(); ++i) {
    // Only the root's data travels; the root's source tensor is not written.
    if (!root) {
      host.push_back(job->output(tensors[i]));
    } else if (static_cast<int64_t>(i) == opts.rootTensor) {
      host.push_back(job->input(tensors[i]));
    } else {
      host.push_back(job->inout(tensors[i]));
    }
  }
  job->issue = [backend = host_, host, opts]() mutable { return backend->broadcast(host, opts); };
  return submit(std::move(job), OpType::BROADCAST, tensors);
}

Work ProcessGroupInfini::allreduce(std::vector<at::Tensor>& tensors,
                                   const c10d::AllreduceOptions& opts) {
  auto device = device_of("allreduce", tensors);
  if (!device) {
    return track(host_->allreduce(tensors, opts));
  }
  if (ccl_ && tensors.size() == 1 &&
      CclCommunicator::all_reduce_serves(tensors[0], opts.reduceOp)) {
    // On InfiniCCL, in place, queued on the current stream: the Work is
    // complete once the stream has passed it.
    const c10::Stream stream = current_stream(device->index());
    ccl_->all_reduce(tensors[0], opts.reduceOp, stream);
    auto done = std::make_shared<c10::Event>(kInfini);
    done->record(stream);
    auto work = c10::make_intrusive<InfiniWork>(rank_, OpType::ALLREDUCE, tensors, *device);
    work->complete(std::move(done), rank_);
    return track(work);
  }
  const HostReduction reduction = host_reduction("allreduce", opts.reduceOp, tensors);
  auto job = new_job(*device, tensors, reduction.scales());
  std::vector<at::Tensor> host;
  for (const auto& t : tensors) {
    host.push_back(job->inout(t));
  }
  job->issue = [backend = host_, host, reduction, opts = with_host_reduction(opts, reduction)]() mutable {
    reduction.prepare(host);
    return backend->allreduce(host, opts);
  };
  return submit(std::move(job), OpType::ALLREDUCE, tensors);
}

Work ProcessGroupInfini::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  auto device = device_of("allreduce_coalesced", tensors);
  if (!device) {
    return track(host_->allreduce_coalesced(tensors, opts));
  }
  const HostReduction reduction =
      host_reduction("allreduce_coalesced", opts.reduceOp, tensors);
  auto job = new_job(*device, tensors, reduction.scales());
  std::vector<at::Tensor> host;
  for (const auto& t : tensors) {
    host.push_back(job->inout(t));
  }
  job->issue = [backend = host_, host, reduction, opts = with_host_reduction(opts, reduction)]() mutable {
    reduction.prepare(host);
    return backend->allreduce_coalesced(host, opts);
  };
  return submit(std::move(job), OpType::ALLREDUCE_COALESCED, tensors);
}

Work ProcessGroupInfini::reduce(std::vector<at::Tensor>& tensors,
                                const c10d::ReduceOptions& opts) {
  auto device = device_of("reduce", tensors);
  if (!device) {
    return track(host_->reduce(tensors, opts));
  }
  const HostReduction reduction = host_reduction("reduce", opts.reduceOp, tensors);
  auto job = new_job(*device, tensors, reduction.scales());
  std::vector<at::Tensor> host;
  for (const auto& t : tensors) {
    // Every rank's buffer, as the host backend may use non-root buffers too.
    host.push_back(job->inout(t));
  }
  job->issue = [backend = host_, host, reduction, opts = with_host_reduction(opts, reduction)]() mutable {
    reduction.prepare(host);
    return backend->reduce(host, opts);
  };
  return submit(std::move(job), OpType::REDUCE, tensors);
}

Work ProcessGroupInfini::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                   std::vector<at::Tensor>& inputs,
                                   const c10d::AllgatherOptions& opts) {
  const auto all = concat(flatten(outputs), inputs);
  auto device = device_of("allgather", all);
  if (!device) {
    return track(host_->allgather(outputs, inputs, opts));
  }
  auto job = new_job(*device, all);
  std::vector<at::Tensor> host_in = staged_inputs(*job, inputs);
  std::vector<std::vector<at::Tensor>> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, opts]() mutable {
    return backend->allgather(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::ALLGATHER, flatten(outputs));
}

Work ProcessGroupInfini::_allgather_base(at::Tensor& output, at::Tensor& input,
                                         const c10d::AllgatherOptions& opts) {
  auto device = device_of("all_gather_into_tensor", {output, input});
  if (!device) {
    return track(host_->_allgather_base(output, input, opts));
  }
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "all_gather_into_tensor on infini: output and input dtypes differ (",
              output.scalar_type(), " vs ", input.scalar_type(), ")");
  TORCH_CHECK(output.numel() == input.numel() * size_,
              "all_gather_into_tensor on infini: the output must have world_size (", size_,
              ") times the input's elements, got ", output.numel(), " and ", input.numel());
  auto job = new_job(*device, {output, input});
  at::Tensor host_in = job->input(input);
  at::Tensor host_out = job->output(output);
  job->issue = [backend = host_, host_in, host_out, opts]() mutable {
    return backend->_allgather_base(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::_ALLGATHER_BASE, {output});
}

Work ProcessGroupInfini::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const auto all = concat(flatten(outputs), inputs);
  auto device = device_of("allgather_coalesced", all);
  if (!device) {
    return track(host_->allgather_coalesced(outputs, inputs, opts));
  }
  auto job = new_job(*device, all);
  std::vector<at::Tensor> host_in = staged_inputs(*job, inputs);
  std::vector<std::vector<at::Tensor>> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, opts]() mutable {
    return backend->allgather_coalesced(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::ALLGATHER_COALESCED, flatten(outputs));
}

Work ProcessGroupInfini::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const auto all = concat(outputs, inputs);
  auto device = device_of("allgather_into_tensor_coalesced", all);
  if (!device) {
    return track(host_->allgather_into_tensor_coalesced(outputs, inputs, opts));
  }
  auto job = new_job(*device, all);
  std::vector<at::Tensor> host_in = staged_inputs(*job, inputs);
  std::vector<at::Tensor> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, opts]() mutable {
    return backend->allgather_into_tensor_coalesced(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::COALESCED, outputs);
}

Work ProcessGroupInfini::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                std::vector<at::Tensor>& inputs,
                                const c10d::GatherOptions& opts) {
  const auto all = concat(flatten(outputs), inputs);
  auto device = device_of("gather", all);
  if (!device) {
    return track(host_->gather(outputs, inputs, opts));
  }
  auto job = new_job(*device, all);
  std::vector<at::Tensor> host_in = staged_inputs(*job, inputs);
  std::vector<std::vector<at::Tensor>> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, opts]() mutable {
    return backend->gather(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::GATHER, flatten(outputs));
}

Work ProcessGroupInfini::scatter(std::vector<at::Tensor>& outputs,
                                 std::vector<std::vector<at::Tensor>>& inputs,
                                 const c10d::ScatterOptions& opts) {
  const auto all = concat(outputs, flatten(inputs));
  auto device = device_of("scatter", all);
  if (!device) {
    return track(host_->scatter(outputs, inputs, opts));
  }
  auto job = new_job(*device, all);
  std::vector<std::vector<at::Tensor>> host_in = staged_inputs(*job, inputs);
  std::vector<at::Tensor> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, opts]() mutable {
    return backend->scatter(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::SCATTER, outputs);
}

Work ProcessGroupInfini::reduce_scatter(std::vector<at::Tensor>& outputs,
                                        std::vector<std::vector<at::Tensor>>& inputs,
                                        const c10d::ReduceScatterOptions& opts) {
  const auto all_inputs = flatten(inputs);
  const auto all = concat(outputs, all_inputs);
  auto device = device_of("reduce_scatter", all);
  if (!device) {
    return track(host_->reduce_scatter(outputs, inputs, opts));
  }
  const HostReduction reduction = host_reduction("reduce_scatter", opts.reduceOp, all_inputs);
  auto job = new_job(*device, all, reduction.scales());
  std::vector<std::vector<at::Tensor>> host_in = staged_inputs(*job, inputs);
  std::vector<at::Tensor> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, reduction,
                opts = with_host_reduction(opts, reduction)]() mutable {
    reduction.prepare(flatten(host_in));
    return backend->reduce_scatter(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::REDUCE_SCATTER, outputs);
}

Work ProcessGroupInfini::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                              const c10d::ReduceScatterOptions& opts) {
  auto device = device_of("reduce_scatter_tensor", {output, input});
  if (!device) {
    return track(host_->_reduce_scatter_base(output, input, opts));
  }
  TORCH_CHECK(output.scalar_type() == input.scalar_type(),
              "reduce_scatter_tensor on infini: output and input dtypes differ (",
              output.scalar_type(), " vs ", input.scalar_type(), ")");
  TORCH_CHECK(input.numel() == output.numel() * size_,
              "reduce_scatter_tensor on infini: the input must have world_size (", size_,
              ") times the output's elements, got ", input.numel(), " and ", output.numel());
  const HostReduction reduction =
      host_reduction("reduce_scatter_tensor", opts.reduceOp, {input});
  auto job = new_job(*device, {output, input}, reduction.scales());
  at::Tensor host_in = job->input(input);
  at::Tensor host_out = job->output(output);
  job->issue = [backend = host_, host_in, host_out, reduction,
                opts = with_host_reduction(opts, reduction)]() mutable {
    reduction.prepare({host_in});
    return backend->_reduce_scatter_base(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::_REDUCE_SCATTER_BASE, {output});
}

Work ProcessGroupInfini::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const auto all = concat(outputs, inputs);
  auto device = device_of("reduce_scatter_tensor_coalesced", all);
  if (!device) {
    return track(host_->reduce_scatter_tensor_coalesced(outputs, inputs, opts));
  }
  const HostReduction reduction =
      host_reduction("reduce_scatter_tensor_coalesced", opts.reduceOp, inputs);
  auto job = new_job(*device, all, reduction.scales());
  std::vector<at::Tensor> host_in = staged_inputs(*job, inputs);
  std::vector<at::Tensor> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, reduction,
                opts = with_host_reduction(opts, reduction)]() mutable {
    reduction.prepare(host_in);
    return backend->reduce_scatter_tensor_coalesced(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::COALESCED, outputs);
}

Work ProcessGroupInfini::alltoall_base(at::Tensor& output, at::Tensor& input,
                                       std::vector<int64_t>& output_splits,
                                       std::vector<int64_t>& input_splits,
                                       const c10d::AllToAllOptions& opts) {
  auto device = device_of("all_to_all_single", {output, input});
  if (!device) {
    return track(host_->alltoall_base(output, input, output_splits, input_splits, opts));
  }
  auto job = new_job(*device, {output, input});
  at::Tensor host_in = job->input(input);
  at::Tensor host_out = job->output(output);
  job->issue = [backend = host_, host_in, host_out, output_splits, input_splits, opts]() mutable {
    return backend->alltoall_base(host_out, host_in, output_splits, input_splits, opts);
  };
  return submit(std::move(job), OpType::ALLTOALL_BASE, {output});
}

Work ProcessGroupInfini::alltoall(std::vector<at::Tensor>& outputs,
                                  std::vector<at::Tensor>& inputs,
                                  const c10d::AllToAllOptions& opts) {
  const auto all = concat(outputs, inputs);
  auto device = device_of("all_to_all", all);
  if (!device) {
    return track(host_->alltoall(outputs, inputs, opts));
  }
  auto job = new_job(*device, all);
  std::vector<at::Tensor> host_in = staged_inputs(*job, inputs);
  std::vector<at::Tensor> host_out = staged_outputs(*job, outputs);
  job->issue = [backend = host_, host_in, host_out, opts]() mutable {
    return backend->alltoall(host_out, host_in, opts);
  };
  return submit(std::move(job), OpType::ALLTOALL, outputs);
}

Work ProcessGroupInfini::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  auto device = device_of("send", tensors);
  if (!device) {
    return track(host_->send(tensors, dst_rank, tag));
  }
  auto job = new_job(*device, tensors);
  std::vector<at::Tensor> host = staged_inputs(*job, tensors);
  job->issue = [backend = host_, host, dst_rank, tag]() mutable {
    return backend->send(host, dst_rank, tag);
  };
  return submit(std::move(job), OpType::SEND, {});
}

Work ProcessGroupInfini::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  auto device = device_of("recv", tensors);
  if (!device) {
    return track(host_->recv(tensors, src_rank, tag));
  }
  auto job = new_job(*device, tensors);
  std::vector<at::Tensor> host = staged_outputs(*job, tensors);
  job->issue = [backend = host_, host, src_rank, tag]() mutable {
    return backend->recv(host, src_rank, tag);
  };
  return submit(std::move(job), OpType::RECV, tensors);
}

Work ProcessGroupInfini::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  auto device = device_of("recv", tensors);
  if (!device) {
    return track(host_->recvAnysource(tensors, tag));
  }
  auto job = new_job(*device, tensors);
  std::vector<at::Tensor> host = staged_outputs(*job, tensors);
  job->issue = [backend = host_, host, tag]() mutable { return backend->recvAnysource(host, tag); };
  return submit(std::move(job), OpType::RECVANYSOURCE, tensors);
}

Work ProcessGroupInfini::barrier(const c10d::BarrierOptions& opts) {
  if (opts.device && opts.device->is_cpu()) {
    return track(host_->barrier(opts));
  }
  // On the device, as NCCL's: after the work already queued on the current
  // stream, and in order with the other collectives of the group.
  const c10::DeviceIndex index =
      opts.device && opts.device->type() == kInfini && opts.device->has_index()
      ? opts.device->index()
      : current_device();
  auto job = new_job(c10::Device(kInfini, index), {});
  c10d::BarrierOptions host_opts = opts;
  host_opts.device = std::nullopt;
  job->issue = [backend = host_, host_opts]() { return backend->barrier(host_opts); };
  return submit(std::move(job), OpType::BARRIER, {});
}

void ProcessGroupInfini::setSequenceNumberForGroup() {
  host_->setSequenceNumberForGroup();
}

uint64_t ProcessGroupInfini::getSequenceNumberForGroup() {
  return host_->getSequenceNumberForGroup();
}

void ProcessGroupInfini::setTimeout(std::chrono::milliseconds timeout) {
  host_->setTimeout(timeout);
}

void ProcessGroupInfini::shutdown() {
  queue_->shutdown();
  host_->shutdown();
}

c10::intrusive_ptr<c10d::Backend> create_process_group(
    c10::intrusive_ptr<c10d::Backend> host, int rank, int size, bool force_staging,
    c10::intrusive_ptr<c10d::Store> store) {
  return c10::make_intrusive<ProcessGroupInfini>(std::move(host), rank, size, force_staging,
                                                 std::move(store));
}

}  // namespace torch_infini::distributed
