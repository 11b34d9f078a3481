#include "distributed/StagedCollective.h"

#include <ATen/ops/empty.h>
#include <c10/core/StreamGuard.h>
#include <c10/util/Exception.h>

#include "core/InfiniFunctions.h"
#include "core/InfiniStream.h"
#include "ops/common.h"
#include "runtime/runtime.h"

namespace torch_infini::distributed {
namespace {

// dst (device) = host, queued on the current stream. Contiguous destinations
// take the asynchronous pinned copy directly; others go through a contiguous
// device buffer so the copy stays queued instead of synchronizing.
void copy_to_device(const at::Tensor& dst, const at::Tensor& host) {
  if (dst.numel() == 0) {
    return;
  }
  if (dst.is_contiguous()) {
    dst.copy_(host, /*non_blocking=*/true);
    return;
  }
  at::Tensor contiguous = at::empty(dst.sizes(), dst.options());
  contiguous.copy_(host, /*non_blocking=*/true);
  dst.copy_(contiguous);
}

}  // namespace

at::Tensor StagedJob::host_like(const at::Tensor& t) {
  // Pinned where the provider has it, so the copies are queued, not waited
  // for; plain host memory otherwise (those providers copy synchronously).
  const bool pinned = runtime::provider().capabilities().pinned_memory;
  return at::empty(t.sizes(), t.options().device(at::kCPU).pinned_memory(pinned));
}

at::Tensor StagedJob::output(const at::Tensor& t) {
  if (direct) {
    return ops::host_alias(t);
  }
  at::Tensor host = host_like(t);
  copy_backs.emplace_back(t, host);
  return host;
}

at::Tensor StagedJob::inout(const at::Tensor& t) {
  if (direct) {
    return ops::host_alias(t);
  }
  at::Tensor host = stage_in(t);
  copy_backs.emplace_back(t, host);
  return host;
}

at::Tensor StagedJob::stage_in(const at::Tensor& t) {
  at::Tensor host = host_like(t);
  if (t.numel() > 0) {
    // A contiguous source keeps the device-to-host copy asynchronous (the
    // device-side gather is queued on the same stream before it).
    host.copy_(t.contiguous(), /*non_blocking=*/true);
  }
  return host;
}

void StagedQueue::Channel::push(std::shared_ptr<StagedJob> job) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    jobs.push_back(std::move(job));
  }
  cv.notify_one();
}

void StagedQueue::Channel::close() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    closed = true;
  }
  cv.notify_all();
}

std::shared_ptr<StagedJob> StagedQueue::Channel::pop() {
  std::unique_lock<std::mutex> lock(mutex);
  cv.wait(lock, [&] { return closed || !jobs.empty(); });
  if (jobs.empty()) {
    return nullptr;
  }
  auto job = std::move(jobs.front());
  jobs.pop_front();
  return job;
}

StagedQueue::StagedQueue()
    : state_(std::make_shared<State>()),
      issuer_(&StagedQueue::run_issuer, state_),
      completer_(&StagedQueue::run_completer, state_) {}

StagedQueue::~StagedQueue() {
  shutdown();
}

void StagedQueue::submit(std::shared_ptr<StagedJob> job) {
  std::lock_guard<std::mutex> lock(shutdown_mutex_);
  TORCH_CHECK(!stopped_, "infini process group: a collective was called after the group was shut down");
  if (job->issue && job->device.type() == kInfini) {
    job->inputs_ready.emplace(kInfini);
    job->inputs_ready->record(current_stream(job->device.index()));
  }
  state_->to_issue.push(std::move(job));
}

void StagedQueue::shutdown() {
  {
    std::lock_guard<std::mutex> lock(shutdown_mutex_);
    if (stopped_) {
      return;
    }
    stopped_ = true;
  }
  state_->to_issue.close();
  const auto self = std::this_thread::get_id();
  if (self == issuer_.get_id()) {
    // The completer waits for this thread to close its channel: no joins.
    issuer_.detach();
    completer_.detach();
    return;
  }
  issuer_.join();
  if (self == completer_.get_id()) {
    completer_.detach();
  } else {
    completer_.join();
  }
}

void StagedQueue::run_issuer(std::shared_ptr<State> state) {
  while (auto job = state->to_issue.pop()) {
    if (job->issue) {
      try {
        if (job->inputs_ready) {
          // Also reports an error raised by the work that produced the inputs.
          job->inputs_ready->synchronize();
        }
        job->host_work = job->issue();
      } catch (...) {
        job->error = std::current_exception();
      }
    }
    state->to_complete.push(std::move(job));
  }
  state->to_complete.close();
}

void StagedQueue::run_completer(std::shared_ptr<State> state) {
  while (auto job = state->to_complete.pop()) {
    complete(*job);
    // Dropping the job releases the staging buffers and device tensors; the
    // allocators keep them until the queued copies that use them have run.
  }
}

void StagedQueue::complete(StagedJob& job) {
  try {
    if (!job.issue) {
      // A coalescing marker: its staged members completed before it (FIFO);
      // the host backend's (CPU tensors) are waited for here.
      for (const auto& member : job.members) {
        if (dynamic_cast<InfiniWork*>(member.get()) == nullptr) {
          member->wait();
        } else if (auto error = member->exception()) {
          job.work->fail(error);
          return;
        }
      }
    } else {
      if (job.error) {
        job.work->fail(job.error);
        return;
      }
      job.host_work->wait();
    }
    const int source_rank =
        job.work->retrieveOpType() == c10d::OpType::RECVANYSOURCE
        ? job.host_work->sourceRank()
        : -1;
    c10::StreamGuard guard(*job.comm_stream);
    for (const auto& [device_tensor, host] : job.copy_backs) {
      copy_to_device(device_tensor, host);
    }
    auto done = std::make_shared<c10::Event>(kInfini);
    done->record(current_stream(job.device.index()));
    job.work->complete(std::move(done), source_rank);
  } catch (...) {
    job.work->fail(std::current_exception());
  }
}

}  // namespace torch_infini::distributed
