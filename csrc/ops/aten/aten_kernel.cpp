// The generic boxed kernel: every ATen overload of ops/aten/aten_registry.h.
//
// PyTorch semantics are settled on the calling thread, the same way for
// every operator: tensors must be on one infini device (CPU 0-dim tensors
// stand for scalars, as on CUDA); outputs are allocated (functional) or
// resized as CPU would (out=), with the shapes, strides and dtypes CPU
// gives; then the provider queues an out= or in-place overload writing into
// them on the current stream.
//
// Where the output metadata comes from depends on the provider:
//   - on one that runs CPU kernels over device memory (the host runtime),
//     from CPU itself: the first call of each kind (overload, argument
//     metadata and values) runs directly, on the calling thread after the
//     stream (ops/aten/aten_direct.h), raising CPU's own errors at the call;
//     later calls of that kind are queued with its outputs' metadata;
//   - elsewhere (the Infini stack, which maps the families of
//     runtime/aten_ops.h onto InfiniOps), from a run on meta tensors
//     (ops/aten/aten_meta.h); what it does not map is refused, or runs through
//     the opt-in CPU fallback.

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/FunctionRef.h>
#include <torch/library.h>

#include <algorithm>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/InfiniFunctions.h"
#include "core/InfiniGraph.h"
#include "core/InfiniStream.h"
#include "ops/aten/aten_cpu_checks.h"
#include "ops/aten/aten_decompose.h"
#include "ops/aten/aten_direct.h"
#include "ops/aten/aten_kernel.h"
#include "ops/aten/aten_layouts.h"
#include "ops/aten/aten_meta.h"
#include "ops/aten/aten_plan.h"
#include "ops/aten/aten_registry.h"
#include "ops/aten/backend_policy.h"
#include "ops/common.h"
#include "ops/fallback/fallback.h"
#include "ops/op_coverage.h"
#include "ops/sync_debug.h"
#include "runtime/aten_ops.h"
#include "runtime/aten_route.h"
#include "runtime/complex_pairs.h"
#include "runtime/current_operator.h"
#include "runtime/ivalue_tensors.h"

namespace torch_infini::ops {
namespace {

bool writes(const c10::Argument& arg) {
  return arg.alias_info() != nullptr && arg.alias_info()->isWrite();
}

// The out= overload of `functional`'s operator whose arguments are
// functional's followed by the outputs.
std::optional<c10::OperatorHandle> find_out_twin(
    const c10::FunctionSchema& functional) {
  const auto& args = functional.arguments();
  for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
    if (name.name != functional.name() ||
        name.overload_name == functional.overload_name()) {
      continue;
    }
    const auto handle = c10::Dispatcher::singleton().findOp(name);
    if (!handle || !handle->hasSchema()) {
      continue;
    }
    const auto& candidate = handle->schema().arguments();
    const size_t outs = functional.returns().size();
    if (candidate.size() != args.size() + outs) {
      continue;
    }
    bool same = true;
    for (size_t i = 0; i < args.size() && same; ++i) {
      same = candidate[i].name() == args[i].name() && !writes(candidate[i]) &&
          *candidate[i].type() == *args[i].type();
    }
    for (size_t i = args.size(); i < candidate.size() && same; ++i) {
      same = writes(candidate[i]) && candidate[i].kwarg_only();
    }
    // Only a twin with its own CPU kernel: a composite out= overload would
    // run the functional one and copy anyway (and cannot take undefined
    // outputs).
    if (same && handle->hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
      return handle;
    }
  }
  return std::nullopt;
}

// Whether `op` or another overload of its operator (in place or not) is
// tagged pointwise.
bool pointwise_operator(const c10::OperatorHandle& op) {
  if (op.hasTag(at::Tag::pointwise)) {
    return true;
  }
  const auto base = [](std::string name) {
    return !name.empty() && name.back() == '_' ? name.substr(0, name.size() - 1)
                                               : name;
  };
  const std::string name = base(op.schema().name());
  for (const auto& other : c10::Dispatcher::singleton().getAllOpNames()) {
    if (base(other.name) != name) {
      continue;
    }
    const auto handle = c10::Dispatcher::singleton().findOp(other);
    if (handle && handle->hasTag(at::Tag::pointwise)) {
      return true;
    }
  }
  return false;
}

// Whether CUDA takes argument `arg` of `op` from the CPU and moves it, where
// the argument is a plain Tensor (index, gather and their kin refuse a CPU
// index on CUDA as here): by operator and argument name.
bool cpu_accepted_index(const c10::FunctionSchema& op, const c10::Argument& arg) {
  static const std::set<std::pair<std::string, std::string>> table = {
      {"aten::index_fill", "index"},  // CUDA's index_fill_ moves its index
      {"aten::index_fill_", "index"},
  };
  return table.count({op.name(), arg.name()}) > 0;
}

Plan make_plan(const c10::OperatorHandle& op) {
  Plan plan;
  const auto& schema = op.schema();
  plan.name = c10::toString(op.operator_name());
  plan.family = runtime::aten_op_family(plan.name);
  plan.elementwise = plan.family != nullptr && plan.family->elementwise;
  plan.sync_reason = sync_reason_of(op);
  plan.checks_on_device = checks_values_on_device(op);
  plan.synchronizes_on_cuda = synchronizes_on_cuda(op);
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto list = schema.arguments()[i].type()->cast<c10::ListType>();
    if (list && list->getElementType()->cast<c10::OptionalType>() &&
        list->getElementType()->expectRef<c10::OptionalType>()
            .getElementType()->kind() == c10::TypeKind::TensorType) {
      plan.index_lists.push_back(i);
    }
    if (cpu_accepted_index(schema, schema.arguments()[i])) {
      plan.cpu_indices.push_back(i);
    }
    if (writes(schema.arguments()[i])) {
      plan.written.push_back(i);
      plan.written_out.push_back(schema.arguments()[i].kwarg_only());
    }
  }
  if (plan.written.empty()) {
    plan.out_twin = find_out_twin(schema);
  } else {
    plan.pointwise = pointwise_operator(op);
  }
  auto& kernels = runtime::kernels();
  plan.mapped = !kernels.runs_cpu_kernels() &&
      (kernels.maps(plan.name) ||
       (plan.out_twin &&
        kernels.maps(c10::toString(plan.out_twin->operator_name()))));
  plan.returns_only_written = !plan.written.empty();
  for (size_t i = 0; i < schema.returns().size(); ++i) {
    plan.returns_only_written =
        plan.returns_only_written && returns_written(schema, i);
  }
  return plan;
}

// Plans are made once per overload, on its first call. The shared table is locked only on a thread's first call of an overload;
// after that each thread finds the plan by the schema's (stable) address.
const Plan& plan_of(const c10::OperatorHandle& op) {
  thread_local std::unordered_map<const c10::FunctionSchema*, const Plan*>
      seen;
  const auto hit = seen.find(&op.schema());
  if (hit != seen.end()) {
    return *hit->second;
  }
  static std::mutex mutex;
  static std::unordered_map<c10::OperatorName, std::unique_ptr<Plan>> plans;
  std::lock_guard<std::mutex> lock(mutex);  // held for a lookup, never a call
  auto& slot = plans[op.operator_name()];
  if (!slot) {
    slot = std::make_unique<Plan>(make_plan(op));
  }
  seen.emplace(&op.schema(), slot.get());
  return *slot;
}

bool is_index_list(const Plan& plan, size_t argument) {
  const auto in = [argument](const std::vector<size_t>& v) {
    return std::find(v.begin(), v.end(), argument) != v.end();
  };
  return in(plan.index_lists) || in(plan.cpu_indices);
}

// CPU tensors among the call's indices (x[cpu_index], x[cpu_mask] = v) as
// copies on `device`: CUDA accepts them so, while index_select and gather,
// which take a plain Tensor, refuse a CPU index there as here.
void move_cpu_indices(const Plan& plan, c10::Device device,
                      torch::jit::Stack* stack, size_t nargs) {
  for (size_t i : plan.cpu_indices) {
    c10::IValue& value = (*stack)[stack->size() - nargs + i];
    if (value.isTensor() && value.toTensor().defined() &&
        value.toTensor().device().is_cpu()) {
      value = value.toTensor().to(device);
    }
  }
  for (size_t i : plan.index_lists) {
    c10::IValue& value = (*stack)[stack->size() - nargs + i];
    const auto cpu = [](const c10::IValue& element) {
      return element.isTensor() && element.toTensor().defined() &&
          element.toTensor().device().is_cpu();
    };
    const auto elements = value.toListRef();
    if (std::none_of(elements.begin(), elements.end(), cpu)) {
      continue;
    }
    c10::List<std::optional<at::Tensor>> moved;
    moved.reserve(elements.size());
    for (const c10::IValue& element : elements) {
      moved.push_back(cpu(element) ? std::optional<at::Tensor>(
                                         element.toTensor().to(device))
                                   : element.toOptional<at::Tensor>());
    }
    value = std::move(moved);
  }
}

// The infini device of the call; every tensor must be on it, except CPU
// 0-dim tensors (scalars) and CPU indices (see move_cpu_indices).
c10::Device call_device(const Plan& plan, const c10::FunctionSchema& schema,
                        c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (t.defined() && t.device().type() == kInfini && !device) {
      device = t.device();
    }
  });
  for (size_t i = 0; i < args.size() && !device; ++i) {
    if (args[i].isDevice() && args[i].toDevice().type() == kInfini) {
      device = args[i].toDevice();  // a factory
    }
  }
  TORCH_CHECK(device.has_value(), plan.name, ": no infini tensor among its "
              "arguments");
  if (!device->has_index()) {
    device = c10::Device(kInfini, current_device());
  }
  for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
    // A CPU 0-dim tensor stands for a scalar only where it is read: an out=
    // tensor on the CPU is refused, as CUDA refuses it.
    const bool read_scalar = t.dim() == 0 &&
        std::find(plan.written.begin(), plan.written.end(), i) ==
            plan.written.end();
    if (!t.defined() || t.device() == *device ||
        (t.device().is_cpu() && (read_scalar || is_index_list(plan, i)))) {
      return;
    }
    TORCH_CHECK(false, plan.name, ": expected all tensors to be on the same "
                "device, but argument '", schema.arguments()[i].name(),
                "' is on ", t.device(), " and the others on ", *device,
                " (the same infini device); move it with .to('",
                device->str(), "') first");
  });
  return *device;
}

// Whether the family serves the call's dtype (the first infini tensor's),
// on providers that map families onto a library.
bool dtype_served(const Plan& plan, const c10::OperatorHandle& op,
                  c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::ScalarType> dtype;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (t.defined() && t.device().type() == kInfini && !dtype) {
      dtype = t.scalar_type();
    }
  });
  const auto& dtypes = plan.family->dtypes;
  // Complex operands of the operators that move whole elements reach the
  // library as pairs of their real dtype, where the provider checks the
  // call (runtime/complex_pairs.h).
  return !dtype || std::find(dtypes.begin(), dtypes.end(), *dtype) != dtypes.end() ||
      (c10::isComplexType(*dtype) &&
       runtime::complex_pairs_operator(op.schema().name()));
}

// Whether the operands have one dtype, where the family needs it (CPU's
// matmul rule, which Python's meta functions do not check).
bool operands_agree(const Plan& plan, c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::ScalarType> dtype;
  bool agree = true;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (!t.defined() || t.device().type() != kInfini) {
      return;
    }
    dtype = dtype.value_or(t.scalar_type());
    agree = agree && t.scalar_type() == *dtype;
  });
  return !plan.family->same_dtype || agree;
}

// A private copy of a CPU scalar tensor, keeping its wrapped-number flag
// (which type promotion reads).
at::Tensor snapshot_scalar(const at::Tensor& t) {
  at::Tensor copy = t.clone();
  copy.unsafeGetTensorImpl()->set_wrapped_number(
      t.unsafeGetTensorImpl()->is_wrapped_number());
  return copy;
}

c10::IValue snapshot_cpu_scalars(const c10::IValue& value) {
  if (value.isTensor() && value.toTensor().defined() &&
      value.toTensor().device().is_cpu()) {
    return snapshot_scalar(value.toTensor());
  }
  return value;
}

// What the provider cannot serve goes one way, from one place (design.md,
// "one exit"): PyTorch's decomposition where one may serve the call, else
// the opt-in CPU fallback where it may run it, else NotImplementedError.
// Callers say whether a decomposition may serve (not where a kernel the
// library has refuses the call for a limit: bfloat16 addmm as mm + add would
// round twice) and word the refusal, given what the decomposition lacked
// (empty where none was tried or it called nothing unserved).
struct Unserved {
  bool decomposable;
  c10::function_ref<void(const std::string& decomposition_refusal)> refuse;
};

void serve_unserved(const Plan& plan, const c10::OperatorHandle& op,
                    torch::jit::Stack* stack, const Unserved& unserved) {
  std::string refusal;
  if (unserved.decomposable && decompose(plan, op, stack, &refusal)) {
    return;
  }
  if (try_cpu_fallback(op, stack)) {
    return;
  }
  unserved.refuse(refusal);
  TORCH_INTERNAL_ASSERT(false, plan.name, ": an unserved call was not refused");
}

// " (and its decomposition ...)": the end of a refusal's reason.
std::string decomposition_lacks(const std::string& refusal,
                                const char* lead) {
  return refusal.empty() ? std::string() : lead + refusal + ")";
}

void check_overlaps(const Plan& plan, c10::ArrayRef<c10::IValue> args) {
  for (size_t w : plan.written) {
    if (!args[w].isTensor()) {
      continue;
    }
    const at::Tensor& out = args[w].toTensor();
    at::assert_no_internal_overlap(out);
    for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
      if (i != w && t.defined() && t.device() == out.device() &&
          !t.is_same(out)) {
        at::assert_no_partial_overlap(out, t);
      }
    });
  }
}

// A new output laid out as `r` says, on the call's device (which its
// device guard has made current).
c10::IValue allocate_result(const ResultLayout& r,
                            std::vector<at::Tensor>& flat) {
  const auto make = [&](const Layout& layout) {
    return layout.defined
        ? empty_strided_on_current_device(layout.sizes, layout.strides,
                                          layout.dtype)
        : at::Tensor();
  };
  if (!r.is_list) {
    flat.push_back(make(r.tensors.front()));
    return flat.back();
  }
  c10::List<at::Tensor> list;
  for (const Layout& layout : r.tensors) {
    flat.push_back(make(layout));
    list.push_back(flat.back());
  }
  return list;
}

// Queues the call on `target`'s stream with outputs laid out as `layouts`
// says, leaving its returns on the stack.
void queue_call(const Plan& plan, const c10::OperatorHandle& op,
                const CallTarget& target, const Layouts& layouts,
                torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const auto args = torch::jit::last(*stack, nargs);
  auto& kernels = target.kernels;

  runtime::AtenCall call{op, {}, {}, plan.family};
  call.args.reserve(nargs + schema.returns().size());
  for (const auto& value : args) {
    call.args.push_back(snapshot_cpu_scalars(value));
  }
  // Written arguments: resized as CPU would.
  std::vector<at::Tensor> outputs;
  bool lists_written = false;
  for (size_t i = 0; i < plan.written.size(); ++i) {
    const c10::IValue& written = args[plan.written[i]];
    if (!written.isTensor()) {  // a tensor list, written in place
      lists_written = true;
      continue;
    }
    at::Tensor out = written.toTensor();
    const Layout& layout = layouts[i].tensors.front();
    match_layout(out, layout.sizes, layout.strides);
    outputs.push_back(out);
  }
  if (!plan.written.empty() && !kernels.runs_cpu_kernels()) {
    check_overlaps(plan, args);
  }
  // New results: allocated here, written by the out= twin or copied from
  // the functional overload's results.
  std::vector<c10::IValue> returns;
  std::vector<at::Tensor> results;
  size_t next_result = plan.written.size();
  size_t written_returned = 0;
  for (size_t i = 0; i < schema.returns().size(); ++i) {
    if (returns_written(schema, i)) {
      returns.push_back(args[plan.written[written_returned++]]);
    } else {
      returns.push_back(allocate_result(layouts[next_result++], results));
    }
  }
  if (plan.out_twin &&
      !plan.twin_refuted->load(std::memory_order_relaxed)) {
    call.op = *plan.out_twin;
    call.twin_of = runtime::TwinOf{op, plan.twin_refuted};
    for (const auto& value : returns) {
      call.args.push_back(value);
    }
  } else {
    call.results_into.assign(results.begin(), results.end());
  }
  outputs.insert(outputs.end(), results.begin(), results.end());

  // Nothing to compute where every output is empty (calls writing tensor
  // lists, or with no outputs at all, always run: they may check values).
  const bool empty = !lists_written && !outputs.empty() &&
      std::all_of(outputs.begin(), outputs.end(), [](const at::Tensor& t) {
        return !t.defined() || t.numel() == 0;
      });
  if (!empty) {
    const runtime::AtenRefusal unsupported = kernels.aten_unsupported(call);
    if (unsupported.refused()) {
      serve_unserved(plan, op, stack, {unsupported.no_kernel, [&](const std::string& refusal) {
        check_supported(plan.name.c_str(),
                        unsupported.reason +
                            decomposition_lacks(refusal, ". PyTorch's decomposition of it calls an "
                                                "operator that is not served ("));
      }});
      return;
    }
    runtime::last_aten_route() = runtime::AtenRoute::kNative;
    kernels.aten(target.device.index(), target.native, std::move(call));
    if (runtime::last_aten_route() == runtime::AtenRoute::kAtenBacked) {
      coverage::served_as(op.operator_name(), coverage::Kind::kAtenBacked);
    }
  }
  torch::jit::drop(*stack, nargs);
  for (auto& value : returns) {
    stack->push_back(std::move(value));
  }
}

// Queues the call with its outputs laid out by a meta run (the Infini
// stack's calls, and the host runtime's first calls during a capture). A
// call the meta run refuses raises CPU's own error for it; so does one
// CPU refuses where its meta function does not look: a call reading only
// empty tensors (checked on CPU copies, which cost nothing) and one writing
// the memory it reads (check_full_aliasing).
void queue_call_laid_out_by_meta(const Plan& plan,
                                 const c10::OperatorHandle& op,
                                 const CallTarget& target,
                                 c10::ArrayRef<c10::IValue> args,
                                 torch::jit::Stack* stack) {
  const bool runs_cpu_kernels = target.kernels.runs_cpu_kernels();
  std::shared_ptr<const Layouts> layouts;
  try {
    layouts = output_layouts(plan, op, args);
  } catch (const std::exception&) {
    const std::exception_ptr meta_error = std::current_exception();
    if (const std::exception_ptr error = cpu_error(op, args)) {
      std::rethrow_exception(error);
    }
    if (runs_cpu_kernels) {
      std::rethrow_exception(meta_error);
    }
    // CPU accepts the call, its meta function does not (PyTorch has none
    // for geqrf, linalg_lstsq, ...; x[mask]'s result's shape depends on the
    // mask's values): its outputs cannot be laid out before it runs.
    serve_unserved(plan, op, stack, {true, [&](const std::string& refusal) {
      cpu_fallback_or_refuse(
          op, stack,
          "PyTorch has no meta function that lays out its outputs before it "
          "runs, which the InfiniOps provider needs (the host runtime, "
          "TORCH_INFINI_PROVIDER=host, runs it)" +
              decomposition_lacks(refusal, ", and its decomposition calls an "
                                  "operator that is not served ("));
    }});
    return;
  }
  if (reads_only_empty_tensors(plan, args)) {
    if (const std::exception_ptr error = cpu_error(op, args)) {
      std::rethrow_exception(error);
    }
  }
  check_full_aliasing(plan, op, args, runs_cpu_kernels);
  queue_call(plan, op, target, *layouts, stack);
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

void aten_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet,
                 torch::jit::Stack* stack) {
  const Plan& plan = plan_of(op);
  const runtime::OperatorScope named(plan.name.c_str());  // for fault reports
  const auto& schema = op.schema();
  const auto args = torch::jit::last(*stack, schema.arguments().size());
  const c10::Device device = call_device(plan, schema, args);
  c10::DeviceGuard guard(device);
  // The device is valid (the guard made it current); its current stream and
  // the provider's kernels are resolved here, once: every step below takes
  // them from `target`.
  const c10::Stream stream = current_stream_of_valid_device(device.index());
  auto& kernels = runtime::kernels();
  const CallTarget target{device, stream, native_stream(stream), kernels};
  if (!plan.index_lists.empty() || !plan.cpu_indices.empty()) {
    move_cpu_indices(plan, device, stack, schema.arguments().size());
  }
  if (backend_policy::divert(op, stack)) {
    return;  // TORCH_INFINI_ENFORCE_BACKEND: not served on that backend
  }

  if (kernels.runs_cpu_kernels()) {
    // Graph capture records queued work: nothing may run directly then.
    const bool capturing = capture_underway() && is_stream_capturing(stream);
    if (capturing && plan.sync_reason.empty() && !indexes_by_mask(args)) {
      // Queued as the Infini stack's calls are: CPU's overlap errors checked
      // here (outside a capture the direct run raises them), the metadata
      // of a first call from a meta run.
      check_overlaps(plan, args);
      queue_call_laid_out_by_meta(plan, op, target, args, stack);
      return;
    }
    SameArguments same = 0;
    if (plan.sync_reason.empty() && !needs_direct_run(plan, args, &same)) {
      LayoutsKey key;
      if (const auto layouts = find_layouts(plan, args, same, &key, [&] {
            return cpu_layouts(plan, op, args);
          })) {
        // Learned from a meta run where it was first met in a capture: CPU's
        // checks its meta function skips, where they cost nothing.
        if (reads_only_empty_tensors(plan, args)) {
          if (const std::exception_ptr error = cpu_error(op, args)) {
            std::rethrow_exception(error);
          }
        }
        queue_call(plan, op, target, *layouts, stack);
        return;
      }
      const auto before = same_written_layouts(plan, args, same);
      if (plan.checks_on_device) {
        // Its values are checked where it runs, for every call: the layouts
        // (and CPU's other errors) from CPU on zero-filled copies, then
        // queued like a later call.
        auto layouts = std::make_shared<const Layouts>(
            cpu_layouts(plan, op, args, /*values=*/false));
        if (keeps_layouts(before, *layouts)) {
          remember_layouts(std::move(key), layouts);
          queue_call(plan, op, target, *layouts, stack);
          return;
        }
      }
      // The first call of its kind: CPU's errors and metadata, then cached.
      auto learned = run_direct(plan, op, target, stack);
      const auto results = torch::jit::last(*stack, schema.returns().size());
      const bool sparse = std::any_of(
          results.begin(), results.end(), [](const c10::IValue& v) {
            return v.isTensor() && v.toTensor().defined() &&
                v.toTensor().is_sparse();
          });
      if (!keeps_layouts(before, *learned) || sparse) {
        // Resizes an input it writes, or returns a sparse tensor (which has
        // no layout to queue into): always run directly.
        key.key.clear();
      }
      remember_layouts(std::move(key), std::move(learned));
      return;
    }
    if (capturing) {
      check_capturable(plan.name.c_str(), stream,
                       plan.sync_reason.empty()
                           ? "it indexes by a boolean mask, so its result's "
                             "shape depends on the data"
                           : plan.sync_reason);
    }
    if (plan.synchronizes_on_cuda ||
        (plan.sync_reason.empty() && indexes_by_mask(args))) {
      check_sync(plan.name.c_str());
    }
    run_direct(plan, op, target, stack);
    return;
  }

  if ((plan.family == nullptr && !plan.mapped) || !plan.sync_reason.empty()) {
    // Not an operator the provider maps onto its library: as if it had no
    // kernel.
    serve_unserved(plan, op, stack, {true, [&](const std::string& refusal) {
      cpu_fallback_or_refuse(
          op, stack,
          decomposition_lacks(refusal, "InfiniOps has no kernel it maps this "
                              "operator onto, and PyTorch's decomposition of "
                              "it calls an operator that is not served ("));
    }});
    return;
  }
  if (plan.family != nullptr && !operands_agree(plan, args)) {
    raise_cpu_error(op, args, std::make_exception_ptr(std::runtime_error(
        plan.name + ": expected all operands to have the same dtype")));
  }
  if (plan.family != nullptr && !dtype_served(plan, op, args)) {
    // The library the provider maps the family onto has no kernel for it
    // (a decomposition would reach the same kernels).
    serve_unserved(plan, op, stack, {false, [&](const std::string&) {
      std::optional<c10::ScalarType> dtype;
      for_each_tensor(args, [&](const at::Tensor& t, size_t) {
        if (t.defined() && t.device().type() == kInfini && !dtype) {
          dtype = t.scalar_type();
        }
      });
      const std::string gap = runtime::missing_datatype(*dtype);
      TORCH_CHECK_NOT_IMPLEMENTED(
          false, plan.name, " on infini (", provider_label(), "): dtype ",
          runtime::dtype_list({*dtype}), " is not supported by the InfiniOps ",
          "kernels it maps onto (", gap.empty() ? "" : gap + "; ", "supported: ",
          runtime::dtype_list(plan.family->dtypes), "); convert with .to(dtype), ",
          "turn on the CPU fallback (TORCH_INFINI_CPU_FALLBACK=1) or use the host ",
          "runtime (TORCH_INFINI_PROVIDER=host)");
    }});
    return;
  }
  queue_call_laid_out_by_meta(plan, op, target, args, stack);
}

}  // namespace

void run_family_kernel(const c10::OperatorHandle& op,
                       torch::jit::Stack* stack) {
  aten_kernel(op, c10::DispatchKeySet(), stack);
}

torch::CppFunction generic_aten_kernel() {
  return torch::CppFunction::makeFromBoxedFunction<&aten_kernel>();
}

bool decompose_as_kernel(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack, std::string* refusal) {
  return decompose(plan_of(op), op, stack, refusal);
}

// The Infini provider's families: registered statically, like every infini
// kernel (the generic registration at load adds the rest).
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const auto& family : runtime::aten_op_families()) {
    for (const auto& overload : family.overloads) {
      const std::string name = overload.substr(overload.find("::") + 2);
      m.impl(name.c_str(), generic_aten_kernel());
    }
  }
}

}  // namespace torch_infini::ops
