#include "ops/aten/aten_direct.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>

#include <algorithm>
#include <mutex>
#include <optional>

#include "core/InfiniFunctions.h"
#include "core/InfiniGenerator.h"
#include "ops/random/host_random.h"
#include "ops/sparse/sparse_coo.h"
#include "runtime/device_trace.h"
#include "runtime/ivalue_tensors.h"
#include "runtime/kernels.h"
#include "runtime/runtime.h"

namespace torch_infini::ops {
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

// A CPU result as a new infini tensor of the same layout.
at::Tensor to_device(const at::Tensor& t, c10::Device device) {
  if (!t.defined()) {
    return t;
  }
  if (t.is_sparse()) {  // a sparse gradient (embedding_bag's)
    return sparse_to_device(t, device);
  }
  at::Tensor source = t.resolve_conj().resolve_neg();
  const bool dense = source.is_non_overlapping_and_dense();
  at::Tensor out = dense
      ? at::empty_strided(source.sizes(), source.strides(),
                          source.options().device(device))
      : at::empty(source.sizes(), source.options().device(device));
  if (out.numel() > 0) {
    out.copy_(source);
  }
  return out;
}

}  // namespace

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

std::shared_ptr<const Layouts> run_direct(const Plan& plan,
                                          const c10::OperatorHandle& op,
                                          const CallTarget& target,
                                          torch::jit::Stack* stack) {
  const c10::Device device = target.device;
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
  // draws from it (none given: the device's default generator).
  std::vector<std::unique_lock<std::mutex>> locks;
  for (size_t i = 0; i < nargs; ++i) {
    if (!runtime::is_generator_argument(schema.arguments()[i])) {
      continue;
    }
    std::optional<at::Generator> given;
    if (cpu[i].isGenerator()) {
      given = cpu[i].toGenerator();
    }
    InfiniGeneratorImpl* impl = host_random::generator_for(
        plan.name.c_str(), given, device.index());
    locks.emplace_back(impl->mutex_);
    cpu[i] = impl->host_generator();
  }

  runtime::provider().stream_synchronize(device.index(), target.native);
  // Work on the device like a queued call's, run here in stream order: the
  // profiler's device timeline shows it on the stream it stands for.
  const bool traced = profiler::tracing();
  const int64_t started = traced ? profiler::now_ns() : 0;
  target.kernels.aten_now(op, cpu);
  if (traced) {
    profiler::record_direct(schema.name().c_str(),
                            schema.overload_name().c_str(), device.index(),
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
      returns.emplace_back(to_device(value.toTensor(), device));
    } else if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) {
        list.push_back(to_device(t, device));
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

}  // namespace torch_infini::ops
