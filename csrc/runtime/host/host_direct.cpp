#include "runtime/host/host_direct.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "runtime/device_trace.h"
#include "runtime/host/host_aliases.h"
#include "runtime/host/kernel_state.h"
#include "runtime/host/memory_protection.h"
#include "runtime/ivalue_tensors.h"
#include "runtime/layout_cache.h"
#include "runtime/runtime.h"

namespace torch_infini::runtime::host {
namespace {

bool overlaps(const at::Tensor& a, const at::Tensor& b) {
  if (!a.defined() || !b.defined() || a.device() != b.device() ||
      !a.has_storage() || !b.has_storage() || a.numel() == 0 ||
      b.numel() == 0) {
    return false;
  }
  return at::get_overlap_status(a, b) != at::MemOverlapStatus::No;
}

// Whether `args[w]` overlaps a tensor of another argument.
bool overlaps_others(c10::ArrayRef<c10::IValue> args, size_t w) {
  const at::Tensor& out = args[w].toTensor();
  bool found = false;
  for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
    found = found || (i != w && overlaps(out, t));
  });
  return found;
}

bool is_mask(const at::Tensor& t) {
  return t.defined() &&
      (t.scalar_type() == at::kBool || t.scalar_type() == at::kByte);
}

// Whether an index tensor of the call is a mask (x[mask], x[mask] = v): the
// result's shape, or what is written, depends on the data.
bool indexes_by_mask(c10::ArrayRef<c10::IValue> args) {
  for (const c10::IValue& value : args) {
    if (value.isList() && !value.isTensorList()) {  // Tensor?[] indices
      for (const c10::IValue& element : value.toListRef()) {
        if (element.isTensor() && is_mask(element.toTensor())) {
          return true;
        }
      }
    }
  }
  return false;
}

// Whether a call must run directly whatever the cache says: a written
// tensor overlaps itself or another argument, other than by being that very
// tensor (recorded in `*same`: CPU kernels take x.mul_(2), run as
// mul.out(x, 2, out=x), as they take any in-place call, so it is queued
// like one), or an index tensor is a mask.
bool needs_direct_run(const Plan& plan, c10::ArrayRef<c10::IValue> args,
                      SameArguments* same) {
  *same = 0;
  for (size_t k = 0; k < plan.written.size(); ++k) {
    const size_t w = plan.written[k];
    if (!args[w].isTensor()) {
      continue;
    }
    const at::Tensor& out = args[w].toTensor();
    if (at::has_internal_overlap(out) == at::MemOverlap::Yes) {
      return true;
    }
    bool partial = false;
    for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
      if (i == w || partial) {
        return;
      }
      if (t.is_same(out) && k < 4 && i < 16) {
        *same |= SameArguments{1} << (16 * k + i);
      } else if (overlaps(out, t)) {
        partial = true;
      }
    });
    if (partial) {
      return true;
    }
  }
  return indexes_by_mask(args);
}

// ATen's CPU kernel for `op`, run now on the calling thread over `stack`:
// its device tensors become CPU aliases of the same memory (tensors sharing
// memory still share it), and the stack then holds the returns, on the CPU.
// The caller has synchronized the stream.
void run_cpu_kernel(const c10::OperatorHandle& op, torch::jit::Stack& stack) {
  DeviceMemoryAccess direct_run;  // a kernel, run on the calling thread
  KernelThreadState as_a_task;  // not the caller's autocast, modes, profiler
  Aliases aliases;
  stack = aliases.convert_all(stack);
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  // The profiler has recorded this call once, as the infini operator it
  // is: the CPU kernel run for it here is not a second call.
  at::DisableRecordFunctionGuard not_recorded;
  op.callBoxed(stack);
}

// Runs the call directly, after the work queued on its stream, replacing
// its arguments with its returns. Returns its outputs' metadata (to cache,
// for a call that may be queued next time).
std::shared_ptr<const Layouts> run_direct(GenericCall& call) {
  const Plan& plan = call.plan;
  const c10::OperatorHandle& op = call.op;
  const CallTarget& target = call.target;
  torch::jit::Stack* stack = &call.stack;
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const std::vector<c10::IValue> args(stack->end() - nargs, stack->end());

  // out= arguments that overlap nothing get CPU scratch tensors of their
  // layout, which the CPU kernel may resize as it likes; the others stay
  // aliases of device memory, so the kernel sees the overlap.
  torch::jit::Stack cpu(args.begin(), args.end());
  std::vector<std::pair<size_t, at::Tensor>> scratch;
  for (size_t i = 0; i < plan.written.size(); ++i) {
    const size_t w = plan.written[i];
    if (plan.written_out[i] && args[w].isTensor() &&
        !overlaps_others(args, w)) {
      const at::Tensor& out = args[w].toTensor();
      at::Tensor tmp = at::empty_strided(out.sizes(), out.strides(),
                                         out.options().device(at::kCPU));
      cpu[w] = tmp;
      scratch.emplace_back(w, tmp);
    }
  }

  // Generators: the infini generator's CPU state, locked while the kernel
  // draws from it.
  std::vector<std::unique_lock<std::mutex>> locks;
  call.bind_cpu_generators(cpu, locks);

  provider().stream_synchronize(target.device.index(), target.native);
  // Work on the device like a queued call's, run here in stream order: the
  // profiler's device timeline shows it on the stream it stands for.
  const bool traced = profiler::tracing();
  const int64_t started = traced ? profiler::now_ns() : 0;
  run_cpu_kernel(op, cpu);
  if (traced) {
    profiler::record_direct(schema.name().c_str(),
                            schema.overload_name().c_str(), target.device.index(),
                            target.native, started);
  }
  locks.clear();

  for (auto& [w, tmp] : scratch) {
    at::Tensor out = args[w].toTensor();
    match_layout(out, tmp.sizes(), tmp.strides());
    if (tmp.numel() > 0) {
      out.copy_(tmp);
    }
  }
  // The other written tensors were written through aliases of device
  // memory, which a CPU kernel may resize (sum(x, 0, out=x)) or move into
  // host memory (mm(a, b, out=a) growing a): the device tensor takes the
  // alias's final layout and contents, as CPU's own tensor would.
  for (size_t i = 0, k = 0; i < schema.returns().size(); ++i) {
    if (!returns_written(schema, i)) {
      continue;
    }
    const size_t w = plan.written[k++];
    const bool scratched =
        std::any_of(scratch.begin(), scratch.end(),
                    [w](const auto& entry) { return entry.first == w; });
    if (scratched || !args[w].isTensor() || !cpu[i].isTensor()) {
      continue;
    }
    const at::Tensor& alias = cpu[i].toTensor();
    at::Tensor out = args[w].toTensor();
    if (alias.sizes() == out.sizes() && alias.strides() == out.strides() &&
        (alias.numel() == 0 || alias.data_ptr() == out.data_ptr())) {
      // Written in place, as laid out; a kernel may still have flipped the
      // output's conjugate or negative bit (linalg_lu_solve.out, left=False),
      // as CPU's own tensor's would be.
      out._set_conj(alias.is_conj());
      out._set_neg(alias.is_neg());
      continue;
    }
    match_layout(out, alias.sizes(), alias.strides());
    if (alias.numel() > 0 && alias.data_ptr() != out.data_ptr()) {
      out.copy_(alias);
    }
  }

  // Returns: written arguments as the caller passed them; new results as
  // infini tensors.
  auto layouts = std::make_shared<Layouts>();
  for (size_t w : plan.written) {
    ResultLayout r;
    r.is_list = !args[w].isTensor();
    if (!r.is_list) {
      r.tensors.push_back(layout_of(args[w].toTensor()));
    }
    layouts->push_back(std::move(r));
  }
  std::vector<c10::IValue> returns;
  size_t written_returned = 0;
  for (size_t i = 0; i < schema.returns().size(); ++i) {
    if (returns_written(schema, i)) {
      returns.push_back(args[plan.written[written_returned++]]);
      continue;
    }
    const c10::IValue& value = cpu[i];
    if (value.isTensor()) {
      returns.emplace_back(call.to_device(value.toTensor()));
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) {
        list.push_back(call.to_device(t));
      }
      returns.emplace_back(list);
    } else {
      returns.push_back(value);
    }
    layouts->push_back(result_layout(returns.back()));
  }
  torch::jit::drop(*stack, nargs);
  for (auto& value : returns) {
    stack->push_back(std::move(value));
  }
  return layouts;
}


// The layouts, before the call, of its written arguments that are also
// inputs (`same`), with their indexes in Plan::written.
std::vector<std::pair<size_t, Layout>> same_written_layouts(
    const Plan& plan, c10::ArrayRef<c10::IValue> args, SameArguments same) {
  std::vector<std::pair<size_t, Layout>> layouts;
  for (size_t k = 0; same != 0 && k < plan.written.size() && k < 4; ++k) {
    if ((same >> (16 * k)) & 0xffff) {
      const at::Tensor& t = args[plan.written[k]].toTensor();
      Layout layout;
      layout.sizes = t.sizes().vec();
      layout.strides = t.strides().vec();
      layouts.emplace_back(k, std::move(layout));
    }
  }
  return layouts;
}

// Whether the call left those written inputs as they were laid out. One
// that resizes an input it writes (add.out(x, y, out=x) broadcasting x)
// is never queued: the queued path resizes its outputs before the kernel
// runs, so the kernel would read the input resized.
bool keeps_layouts(const std::vector<std::pair<size_t, Layout>>& before,
                   const Layouts& learned) {
  return std::all_of(before.begin(), before.end(), [&](const auto& entry) {
    const Layout& after = learned[entry.first].tensors.front();
    return after.sizes == entry.second.sizes &&
        after.strides == entry.second.strides;
  });
}

// A call that may be queued: with the layouts learned from a call like it,
// else run directly once (or, where CUDA checks its values on the device,
// laid out by CPU on zeros and queued) and its layouts learned.
void queue_or_learn(GenericCall& call, SameArguments same) {
  const Plan& plan = call.plan;
  const auto args = call.args;
  LayoutsKey key;
  if (const auto layouts = find_layouts(plan, args, same, &key, [&] {
        // The verification mode's recompute. With the device's values, CPU
        // may raise what the queued call raises at the next
        // synchronization (an index out of range, an integer division by
        // zero): an error of the data, not of the key, which claims the
        // layouts of everything but the values. Those come from CPU's
        // checks on copies of zero bytes, or of nonzero bytes where zeros
        // are refused too (a divisor); a call refused with all three, or
        // laid out otherwise, is reported stale.
        try {
          return call.cpu_layouts(CopiedValues::kDevice);
        } catch (const c10::Error& with_values) {
          try {
            return call.cpu_layouts(CopiedValues::kZeros);
          } catch (const c10::Error&) {
            try {
              return call.cpu_layouts(CopiedValues::kNonzero);
            } catch (const c10::Error&) {
              throw with_values;
            }
          }
        }
      })) {
    // Learned from CPU's kernel, or from a meta run where it was first met
    // in a capture (which asked CPU's checks its meta function skips before
    // caching, see ops/aten/aten_meta.h): nothing left to check.
    call.queue(*layouts);
    return;
  }
  const auto before = same_written_layouts(plan, args, same);
  if (plan.checks_on_device) {
    // Its values are checked where it runs, for every call: the layouts
    // (and CPU's other errors) from CPU on zero-filled copies, then
    // queued like a later call.
    auto layouts = std::make_shared<const Layouts>(
        call.cpu_layouts(CopiedValues::kZeros));
    if (keeps_layouts(before, *layouts)) {
      remember_layouts(std::move(key), layouts);
      call.queue(*layouts);
      return;
    }
  }
  // The first call of its kind: CPU's errors and metadata, then cached.
  auto learned = run_direct(call);
  const auto results =
      torch::jit::last(call.stack, call.op.schema().returns().size());
  const bool sparse =
      std::any_of(results.begin(), results.end(), [](const c10::IValue& v) {
        return v.isTensor() && v.toTensor().defined() &&
            v.toTensor().is_sparse();
      });
  if (!keeps_layouts(before, *learned) || sparse) {
    // Resizes an input it writes, or returns a sparse tensor (which has
    // no layout to queue into): always run directly.
    key.key.clear();
  }
  remember_layouts(std::move(key), std::move(learned));
}

}  // namespace

void serve_directly_first(GenericCall& call) {
  const Plan& plan = call.plan;
  const auto args = call.args;
  // Graph capture records queued work: nothing may run directly then.
  const bool capturing = call.capturing();
  if (capturing && plan.sync_reason.empty() && !indexes_by_mask(args)) {
    // Queued as the Infini stack's calls are: CPU's overlap errors checked
    // here (outside a capture the direct run raises them), the metadata
    // of a first call from a meta run.
    call.check_overlaps();
    call.queue_laid_out_by_meta(/*kernels_see_aliases=*/true,
                                /*raise_without_meta=*/true);
    return;
  }
  SameArguments same = 0;
  if (plan.sync_reason.empty() && !needs_direct_run(plan, args, &same)) {
    queue_or_learn(call, same);
    return;
  }
  if (capturing) {
    call.check_capturable(plan.sync_reason.empty()
                              ? "it indexes by a boolean mask, so its result's "
                                "shape depends on the data"
                              : plan.sync_reason);
  }
  if (plan.synchronizes_on_cuda ||
      (plan.sync_reason.empty() && indexes_by_mask(args))) {
    call.check_sync();
  }
  run_direct(call);
}

}  // namespace torch_infini::runtime::host
