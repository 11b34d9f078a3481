#pragma once

// CPU's checks for the calls whose outputs a meta run lays out (the Infini
// stack's, and the host runtime's first calls during a capture): PyTorch's
// meta functions skip some of the checks CPU's kernels make, and a provider
// that does not run CPU kernels cannot make them itself. Each runs the
// call's CPU kernel on zero-filled CPU copies of its tensors: a call that
// fails its checks fails before touching values.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <exception>

#include "ops/aten/aten_plan.h"

namespace torch_infini::ops {

// The error CPU raises for this call, or null where CPU accepts it. With
// `keep_aliases`, tensors sharing device memory share CPU memory too (views
// of one zero-filled CPU copy of their storage), so that CPU's overlap
// checks see what the device call would do.
std::exception_ptr cpu_error(const c10::OperatorHandle& op,
                             c10::ArrayRef<c10::IValue> args,
                             bool keep_aliases = false);

// CPU's refusal of the call's dtypes ("\"softplus_cpu\" not implemented for
// 'Int'"), or null: the call's CPU kernel run on one-element stand-ins of
// its tensors (same dtypes and ranks, zero-filled), so that it costs a
// small kernel whatever the tensors' sizes. Only the kernel's dispatch on
// dtypes is read from it (a shape check the stand-ins fail says nothing);
// null for an operator without a CPU kernel. Asked before a decomposition
// is recorded: PyTorch's decompositions compute in float32 or promote, so
// they accept dtypes CPU's kernels refuse.
std::exception_ptr cpu_dtype_refusal(const c10::OperatorHandle& op,
                                     c10::ArrayRef<c10::IValue> args);

// cpu_error(op, args, /*keep_aliases=*/true), remembered per thread where
// CPU accepts the call: asked on every call whose written argument is the
// memory of one it reads (an optimizer's x.mul_(beta) on the Infini stack
// runs as mul.out(x, beta, out=x)), where the try costs more than the call.
// Keyed by the call exactly and the state (docs/caches.md); the
// verification mode tries every hit again.
std::exception_ptr cpu_error_on_aliases(const Plan& plan,
                                        const c10::OperatorHandle& op,
                                        c10::ArrayRef<c10::IValue> args);

// The layouts CPU gives the call's outputs, as a direct run learns them
// (runtime/host/host_direct.h): the call run on CPU copies of its arguments'
// storages, values and aliasing kept (each read through the runtime, after
// the work queued on it), generators replaced by fresh CPU ones, so that
// nothing on the device or in a generator changes. The copies hold the
// device's values (the verification mode, runtime/cache_verification.h: it
// synchronizes), or filler bytes (CPU's checks of everything but the
// values, and nothing read from the device).
Layouts cpu_layouts(const Plan& plan, const c10::OperatorHandle& op,
                    c10::ArrayRef<c10::IValue> args,
                    runtime::CopiedValues values);

// Raises CPU's error for a call known to be bad, or `fallback_error` where
// CPU accepts it (the message is CPU's, not a meta function's).
[[noreturn]] void raise_cpu_error(const c10::OperatorHandle& op,
                                  c10::ArrayRef<c10::IValue> args,
                                  const std::exception_ptr& fallback_error);

// A written argument that is the very memory of an argument it reads: CPU
// decides, on CPU memory aliased alike, and its error is raised where it
// refuses the call (index_select, gather and cat do). Where it accepts it, a
// provider whose kernels do not see the aliasing (`kernels_see_aliases`
// false: InfiniOps' kernels get the two as separate tensors) serves only a
// pointwise operator (Plan::pointwise), which reads each element before
// writing it; the rest is refused.
void check_full_aliasing(const Plan& plan, const c10::OperatorHandle& op,
                         c10::ArrayRef<c10::IValue> args,
                         bool kernels_see_aliases);

// Whether every infini tensor the call reads (not the ones it writes) is
// empty: CPU's checks then cost nothing to run on CPU copies, and some
// functional kernels check more than the meta function their outputs are
// laid out by (max() of no elements raises on CPU; its meta function and its
// out= twin return -inf).
bool reads_only_empty_tensors(const Plan& plan,
                              c10::ArrayRef<c10::IValue> args);

// Raises CPU's error for a call that reads only empty tensors, where CPU
// refuses it.
void raise_cpu_error_if_reading_only_empty(const Plan& plan,
                                           const c10::OperatorHandle& op,
                                           c10::ArrayRef<c10::IValue> args);

}  // namespace torch_infini::ops
