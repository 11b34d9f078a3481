#pragma once

// One call of the generic ATen kernel as the ops layer hands it to the
// provider (OpKernels::serve): PyTorch's semantics for it are settled (its
// device, that device's current stream, CPU indices moved, the backend
// policy applied), and what is left is how the provider runs it. That is
// the provider's strategy: the Infini stack lays every call out by a meta
// run and queues it (queue_declared); the host runtime runs the first call
// of each kind directly and queues later ones with what it learned
// (runtime/host/host_direct.h).
//
// The steps a strategy takes are the ops layer's (they need PyTorch's
// semantics: CPU's checks, a meta run, graph capture, generators), so the
// ops layer implements this interface and the provider calls it: the
// arrow between the two layers points down, and ops/ never asks which
// provider it is.

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>

#include <exception>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/aten_plan.h"

namespace torch_infini::runtime {

class GenericCall {
 public:
  GenericCall(const Plan& plan, const c10::OperatorHandle& op,
              const CallTarget& target, torch::jit::Stack& stack)
      : plan(plan),
        op(op),
        target(target),
        stack(stack),
        args(torch::jit::last(stack, op.schema().arguments().size())) {}
  virtual ~GenericCall() = default;
  GenericCall(const GenericCall&) = delete;
  GenericCall& operator=(const GenericCall&) = delete;

  const Plan& plan;
  const c10::OperatorHandle& op;
  const CallTarget& target;
  // The stack with the call's arguments on top; a step that runs the call
  // replaces them with its returns.
  torch::jit::Stack& stack;
  // The call's arguments, as handed over: read them before a step runs the
  // call.
  const c10::ArrayRef<c10::IValue> args;

  // --- How a call is queued ---

  // The call as a provider that maps operators onto its library takes it:
  // what it declares it does not map (OpKernels::maps, the families of
  // runtime/aten_ops.h, their dtypes) goes to the one exit for what is not
  // served; the rest is laid out by a meta run and queued.
  virtual void queue_declared() = 0;
  // Outputs laid out by a meta run, with CPU's checks its meta function
  // skips, then queued. `kernels_see_aliases`: the provider's kernels see
  // a written argument that is the memory of one they read (CPU's do;
  // otherwise only pointwise operators take such a call). A call without a
  // meta function goes to the one exit unless `raise_without_meta` (a
  // provider that runs it otherwise, but cannot now: during a capture).
  virtual void queue_laid_out_by_meta(bool kernels_see_aliases,
                                      bool raise_without_meta) = 0;
  // Outputs allocated or resized as `layouts` says, then queued (or, where
  // the provider refuses it, the one exit). The caller has checked the
  // overlaps CPU refuses.
  virtual void queue(const Layouts& layouts) = 0;

  // --- CPU's checks, where the call is not run on the CPU ---

  // CPU's overlap errors for the written arguments (internal and partial).
  virtual void check_overlaps() = 0;
  // The layouts CPU gives the outputs (ops/aten/aten_cpu_checks.h), with
  // the device's values or with filler (CPU's checks of everything but the
  // values, nothing read from the device).
  virtual Layouts cpu_layouts(CopiedValues values) = 0;

  // --- Graph capture and synchronization, as CUDA has them ---

  // Whether the call's stream is capturing a graph (nothing may run
  // directly then).
  virtual bool capturing() const = 0;
  // Refuses the call during a capture, for `reason`.
  virtual void check_capturable(const std::string& reason) = 0;
  // Reports the synchronization CUDA's kernel makes (torch.infini's sync
  // debug mode).
  virtual void check_sync() = 0;

  // --- A direct run's arguments and results ---

  // Replaces the generator arguments on `cpu` (the call's arguments, as
  // its CPU kernel will see them) by the CPU state of the infini
  // generators they stand for, each locked into `locks` while the kernel
  // draws from it.
  virtual void bind_cpu_generators(
      torch::jit::Stack& cpu, std::vector<std::unique_lock<std::mutex>>& locks) = 0;
  // A CPU result as a new tensor on the call's device (dense or sparse).
  virtual at::Tensor to_device(const at::Tensor& cpu_result) = 0;
};

}  // namespace torch_infini::runtime
