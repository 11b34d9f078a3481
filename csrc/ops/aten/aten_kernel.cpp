// The generic boxed kernel: every ATen overload of ops/aten/aten_registry.h.
//
// PyTorch semantics are settled on the calling thread, the same way for
// every operator: tensors must be on one infini device (CPU 0-dim tensors
// stand for scalars, as on CUDA); outputs are allocated (functional) or
// resized as CPU would (out=), with the shapes, strides and dtypes CPU
// gives; then the provider queues an out= or in-place overload writing into
// them on the current stream.
//
// How the provider runs the call is its own strategy (OpKernels::serve,
// runtime/generic_call.h), which takes the steps defined here: the Infini
// stack's lays every call out by a meta run (ops/aten/aten_meta.h) and
// queues what it maps onto InfiniOps (PlannedCall::queue_declared); the host
// runtime's runs the first call of each kind directly and queues later ones
// (runtime/host/host_direct.h). What a provider cannot serve leaves through
// one exit (serve_unserved): decomposition, the opt-in CPU fallback, or a
// refusal.

#include <ATen/EmptyTensor.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/FunctionRef.h>
#include <c10/util/SmallVector.h>
#include <torch/library.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "core/InfiniFunctions.h"
#include "core/InfiniGenerator.h"
#include "core/InfiniGraph.h"
#include "core/InfiniStream.h"
#include "ops/aten/aten_cpu_checks.h"
#include "ops/aten/aten_decompose.h"
#include "ops/aten/aten_kernel.h"
#include "ops/aten/aten_meta.h"
#include "ops/aten/aten_plan.h"
#include "ops/aten/aten_registry.h"
#include "ops/aten/backend_policy.h"
#include "ops/common.h"
#include "ops/fallback/fallback.h"
#include "ops/op_coverage.h"
#include "ops/random/host_random.h"
#include "ops/sparse/sparse_coo.h"
#include "ops/sync_debug.h"
#include "runtime/aten_ops.h"
#include "runtime/complex_pairs.h"
#include "runtime/current_operator.h"
#include "runtime/generic_call.h"
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
  plan.contiguous_inputs = needs_contiguous_inputs(op);
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
  plan.mapped = kernels.maps(plan.name) ||
      (plan.out_twin &&
       kernels.maps(c10::toString(plan.out_twin->operator_name())));
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
  // A plain one-element tensor (every Python number an operator is called
  // with) is copied by hand: clone() costs a trip through the dispatcher
  // on every such call.
  at::Tensor copy;
  if (t.dim() == 0 && t.layout() == c10::kStrided && !t.is_conj() &&
      !t.is_neg() && !t._is_zerotensor()) {
    copy = at::detail::empty_cpu({}, t.scalar_type());
    std::memcpy(copy.mutable_data_ptr(), t.const_data_ptr(), t.element_size());
  } else {
    copy = t.clone();
  }
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

// Inputs not contiguous in their suggested memory format replaced by
// contiguous copies on the device (queued before the call, in stream
// order), for an operator whose queued kernels read them wrongly
// (Plan::contiguous_inputs).
void contiguous_inputs(const Plan& plan, torch::jit::Stack& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].isTensor() ||
        std::find(plan.written.begin(), plan.written.end(), i) !=
            plan.written.end()) {
      continue;
    }
    const at::Tensor& t = args[i].toTensor();
    if (t.defined() && t.device().type() == kInfini &&
        !t.is_contiguous(t.suggest_memory_format())) {
      args[i] = t.contiguous(t.suggest_memory_format());
    }
  }
}

// The one exit (aten_kernel.h), with the call's plan.
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
                            c10::SmallVectorImpl<at::Tensor>& flat) {
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
// says, leaving its returns on the stack. CPU's overlap errors are checked
// first, unless `overlaps_checked`.
void queue_call(const Plan& plan, const c10::OperatorHandle& op,
                const CallTarget& target, const Layouts& layouts,
                torch::jit::Stack* stack, bool overlaps_checked) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const auto args = torch::jit::last(*stack, nargs);
  auto& kernels = target.kernels;

  runtime::AtenCall call{op, {}, {}, plan.family};
  call.args.reserve(nargs + schema.returns().size());
  for (const auto& value : args) {
    call.args.push_back(snapshot_cpu_scalars(value));
  }
  if (plan.contiguous_inputs) {
    contiguous_inputs(plan, call.args);
  }
  // Written arguments: resized as CPU would. (Small vectors here and below:
  // a call has a few outputs, and every queued call passes this way.)
  c10::SmallVector<at::Tensor, 4> outputs;
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
  if (!plan.written.empty() && !overlaps_checked) {
    check_overlaps(plan, args);
  }
  // New results: allocated here, written by the out= twin or copied from
  // the functional overload's results.
  c10::SmallVector<c10::IValue, 4> returns;
  c10::SmallVector<at::Tensor, 4> results;
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
    const runtime::AtenLaunch launch =
        kernels.aten(target.device.index(), target.native, call);
    const runtime::AtenRefusal& unsupported = launch.refusal;
    if (unsupported.refused()) {
      serve_unserved(plan, op, stack, {unsupported.no_kernel, [&](const std::string& refusal) {
        check_supported(plan.name.c_str(),
                        unsupported.reason +
                            decomposition_lacks(refusal, ". PyTorch's decomposition of it calls an "
                                                "operator that is not served ("));
      }});
      return;
    }
    if (launch.aten_backed) {
      coverage::served_as(op.operator_name(), coverage::Kind::kAtenBacked);
    }
  }
  torch::jit::drop(*stack, nargs);
  for (auto& value : returns) {
    stack->push_back(std::move(value));
  }
}

// How a call laid out by a meta run is queued (GenericCall's
// queue_laid_out_by_meta says what each means).
struct MetaQueueing {
  bool kernels_see_aliases = false;
  bool raise_without_meta = false;
  bool overlaps_checked = false;
};

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
                                 torch::jit::Stack* stack,
                                 const MetaQueueing& how) {
  std::shared_ptr<const Layouts> layouts;
  try {
    layouts = output_layouts(plan, op, args);
  } catch (const std::exception&) {
    const std::exception_ptr meta_error = std::current_exception();
    if (const std::exception_ptr error = cpu_error(op, args)) {
      std::rethrow_exception(error);
    }
    if (how.raise_without_meta) {
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
  check_full_aliasing(plan, op, args, how.kernels_see_aliases);
  queue_call(plan, op, target, *layouts, stack, how.overlaps_checked);
}

// The call as this layer hands it to the provider's strategy
// (runtime/generic_call.h): the steps above, bound to one call.
class PlannedCall final : public runtime::GenericCall {
 public:
  using GenericCall::GenericCall;

  void queue_declared() override;
  void queue_laid_out_by_meta(bool kernels_see_aliases,
                              bool raise_without_meta) override {
    queue_call_laid_out_by_meta(
        plan, op, target, args, &stack,
        MetaQueueing{kernels_see_aliases, raise_without_meta,
                     /*overlaps_checked=*/true});
  }
  void queue(const Layouts& layouts) override {
    queue_call(plan, op, target, layouts, &stack, /*overlaps_checked=*/true);
  }

  void check_overlaps() override { ops::check_overlaps(plan, args); }
  Layouts cpu_layouts(runtime::CopiedValues values) override {
    return ops::cpu_layouts(plan, op, args, values);
  }

  bool capturing() const override {
    return capture_underway() && is_stream_capturing(target.stream);
  }
  void check_capturable(const std::string& reason) override {
    torch_infini::check_capturable(plan.name.c_str(), target.stream, reason);
  }
  void check_sync() override { ops::check_sync(plan.name.c_str()); }

  void bind_cpu_generators(
      torch::jit::Stack& cpu,
      std::vector<std::unique_lock<std::mutex>>& locks) override;
  at::Tensor to_device(const at::Tensor& cpu_result) override;
};

void PlannedCall::queue_declared() {
  torch::jit::Stack* on_stack = &stack;
  if ((plan.family == nullptr && !plan.mapped) || !plan.sync_reason.empty()) {
    // Not an operator the provider maps onto its library: as if it had no
    // kernel.
    serve_unserved(plan, op, on_stack, {true, [&](const std::string& refusal) {
      cpu_fallback_or_refuse(
          op, on_stack,
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
    serve_unserved(plan, op, on_stack, {false, [&](const std::string&) {
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
  queue_call_laid_out_by_meta(plan, op, target, args, on_stack, MetaQueueing{});
}

// Generators: the infini generator's CPU state (none given: the device's
// default generator).
void PlannedCall::bind_cpu_generators(
    torch::jit::Stack& cpu, std::vector<std::unique_lock<std::mutex>>& locks) {
  const auto& arguments = op.schema().arguments();
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (!runtime::is_generator_argument(arguments[i])) {
      continue;
    }
    std::optional<at::Generator> given;
    if (cpu[i].isGenerator()) {
      given = cpu[i].toGenerator();
    }
    InfiniGeneratorImpl* impl = host_random::generator_for(
        plan.name.c_str(), given, target.device.index());
    locks.emplace_back(impl->mutex_);
    cpu[i] = impl->host_generator();
  }
}

// A CPU result as a new infini tensor of the same layout.
at::Tensor PlannedCall::to_device(const at::Tensor& t) {
  if (!t.defined()) {
    return t;
  }
  if (t.is_sparse()) {  // a sparse gradient (embedding_bag's)
    return sparse_to_device(t, target.device);
  }
  at::Tensor source = t.resolve_conj().resolve_neg();
  const bool dense = source.is_non_overlapping_and_dense();
  at::Tensor out = dense
      ? at::empty_strided(source.sizes(), source.strides(),
                          source.options().device(target.device))
      : at::empty(source.sizes(), source.options().device(target.device));
  if (out.numel() > 0) {
    out.copy_(source);
  }
  return out;
}

void aten_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet,
                 torch::jit::Stack* stack) {
  const Plan& plan = plan_of(op);
  const runtime::OperatorScope named(plan.name.c_str());  // for fault reports
  const auto& schema = op.schema();
  const auto args = torch::jit::last(*stack, schema.arguments().size());
  const c10::Device device = call_device(plan, schema, args);
  // The call's device is made current for the call (its allocations and
  // stream are the current device's), where it is not already: most calls
  // are on the current device, and a guard costs two trips through the
  // device-guard interface. Either way the device is valid (the guard
  // checks the one it sets), and its current stream and the provider's
  // kernels are resolved here, once: every step below takes them from
  // `target`.
  c10::OptionalDeviceGuard guard;
  if (device.index() != current_device()) {
    guard.reset_device(device);
  }
  const c10::Stream stream = current_stream_of_valid_device(device.index());
  auto& kernels = runtime::kernels();
  const CallTarget target{device, stream, native_stream(stream), kernels};
  if (!plan.index_lists.empty() || !plan.cpu_indices.empty()) {
    move_cpu_indices(plan, device, stack, schema.arguments().size());
  }
  if (backend_policy::divert(op, stack)) {
    return;  // TORCH_INFINI_ENFORCE_BACKEND: not served on that backend
  }
  PlannedCall call(plan, op, target, *stack);
  kernels.serve(call);
}

}  // namespace

void run_family_kernel(const c10::OperatorHandle& op,
                       torch::jit::Stack* stack) {
  aten_kernel(op, c10::DispatchKeySet(), stack);
}

torch::CppFunction generic_aten_kernel() {
  return torch::CppFunction::makeFromBoxedFunction<&aten_kernel>();
}

void serve_unserved(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                    const Unserved& unserved) {
  serve_unserved(plan_of(op), op, stack, unserved);
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
