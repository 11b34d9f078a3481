// One boxed kernel for the ATen operator families of runtime/aten_ops.h
// (matmul, elementwise, softmax, normalization, reductions, indexing, loss).
//
// PyTorch semantics are settled here, on the calling thread, the same way
// for every operator: tensors must be on one infini device (CPU 0-dim
// tensors stand for scalars, as on CUDA); the call is first run on meta
// tensors of the same sizes, strides and dtypes, which raises CPU's own
// errors for bad shapes and arguments and gives the output's shape, strides
// and dtype exactly as CPU would (type promotion included); outputs are then
// allocated (functional), or resized as CPU would (out=); and the provider
// gets an out= or in-place overload to enqueue on the current stream.

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <optional>
#include <set>
#include <unordered_map>

#include "core/InfiniFunctions.h"
#include "ops/aten_kernel.h"
#include "ops/aten_meta.h"
#include "ops/aten_plan.h"
#include "ops/common.h"
#include "ops/fallback.h"
#include "runtime/aten_ops.h"

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

Plan make_plan(const c10::OperatorHandle& op) {
  Plan plan;
  const auto& schema = op.schema();
  plan.name = c10::toString(op.operator_name());
  plan.family = runtime::aten_op_family(plan.name);
  TORCH_INTERNAL_ASSERT(plan.family != nullptr, plan.name,
                        " is registered but in no op family");
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    if (writes(schema.arguments()[i])) {
      plan.written.push_back(i);
    }
  }
  // CPU out= kernels that resize their output to hold an intermediate
  // cannot write into device memory; their functional overloads run instead.
  static const std::set<std::string> resize_their_output = {
      "aten::mse_loss"};
  if (plan.written.empty() && !resize_their_output.count(plan.name)) {
    plan.out_twin = find_out_twin(schema);
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

// The infini device of the call; every tensor must be on it, except CPU
// 0-dim tensors (scalars).
c10::Device call_device(const Plan& plan, const c10::FunctionSchema& schema,
                        c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::Device> device;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (t.defined() && t.device().type() == kInfini && !device) {
      device = t.device();
    }
  });
  TORCH_CHECK(device.has_value(), plan.name, ": no infini tensor among its "
              "arguments");
  for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
    if (!t.defined() || t.device() == *device ||
        (t.device().is_cpu() && t.dim() == 0)) {
      return;
    }
    TORCH_CHECK(false, plan.name, ": expected all tensors on the same "
                "infini device (", *device, "), but argument '", schema.arguments()[i].name(), "' is on ",
                t.device(), "; move it with .to('", device->str(),
                "') first");
  });
  return *device;
}

void check_dtype(const Plan& plan, c10::ArrayRef<c10::IValue> args) {
  std::optional<c10::ScalarType> dtype;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (!t.defined() || t.device().type() != kInfini) {
      return;
    }
    if (!dtype) {
      dtype = t.scalar_type();
    }
    // Checked here: Python's meta functions for matmul do not, and CPU
    // would raise only later, on the stream.
    TORCH_CHECK(!plan.family->same_dtype || t.scalar_type() == *dtype,
                plan.name, ": expected all operands to have the same dtype, "
                "but got ", runtime::dtype_list({*dtype}), " and ",
                runtime::dtype_list({t.scalar_type()}));
  });
  const auto& dtypes = plan.family->dtypes;
  TORCH_CHECK_NOT_IMPLEMENTED(
      !dtype ||
          std::find(dtypes.begin(), dtypes.end(), *dtype) != dtypes.end(),
      plan.name, " on infini (", provider_label(), "): dtype ",
      runtime::dtype_list({*dtype}),
      " is not supported (supported: ", runtime::dtype_list(dtypes),
      "); convert with .to(dtype) first");
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

// `out` given `sizes` and `strides` the way CPU resizes an out= argument.
void match_layout(at::Tensor& out, at::IntArrayRef sizes,
                  at::IntArrayRef strides) {
  if (out.sizes() != sizes) {
    out.resize_(sizes);
  }
  if (out.strides() != strides) {
    out.as_strided_(sizes, strides);
  }
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

void aten_kernel(const c10::OperatorHandle& op, c10::DispatchKeySet,
                 torch::jit::Stack* stack) {
  const Plan& plan = plan_of(op);
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  const auto args = torch::jit::last(*stack, nargs);
  const c10::Device device = call_device(plan, schema, args);
  check_dtype(plan, args);
  c10::DeviceGuard guard(device);

  const auto cached_layouts = output_layouts(plan, op, args);
  const std::vector<Layout>& layouts = *cached_layouts;

  runtime::AtenCall call{op, {}, {}, plan.family};
  call.args.reserve(nargs + schema.returns().size());
  for (const auto& value : args) {
    call.args.push_back(snapshot_cpu_scalars(value));
  }
  std::vector<at::Tensor> outputs;
  if (plan.written.empty()) {
    for (const Layout& layout : layouts) {
      outputs.push_back(
          layout.defined
              ? at::empty_strided(layout.sizes, layout.strides,
                                  at::TensorOptions()
                                      .dtype(layout.dtype)
                                      .device(device))
              : at::Tensor());
    }
    if (plan.out_twin) {
      call.op = *plan.out_twin;
      for (const auto& out : outputs) {
        call.args.push_back(out);
      }
    } else {
      call.results_into.assign(outputs.begin(), outputs.end());
    }
  } else {
    for (size_t i = 0; i < plan.written.size(); ++i) {
      const c10::IValue& written = args[plan.written[i]];
      if (written.isTensorList()) {  // written in place, never resized
        for (const at::Tensor& t : written.toTensorList()) {
          outputs.push_back(t);
        }
        continue;
      }
      at::Tensor out = written.toTensor();
      match_layout(out, layouts[i].sizes, layouts[i].strides);
      outputs.push_back(out);
    }
    check_overlaps(plan, args);
  }

  const bool empty = std::all_of(outputs.begin(), outputs.end(),
                                 [](const at::Tensor& t) {
                                   return !t.defined() || t.numel() == 0;
                                 });
  if (!empty) {
    auto& kernels = runtime::kernels();
    const std::string unsupported = kernels.aten_unsupported(call);
    if (!unsupported.empty()) {
      // The opt-in CPU fallback may run the call as the user made it.
      if (try_cpu_fallback(op, stack)) {
        return;
      }
      check_supported(plan.name.c_str(), unsupported);
    }
    kernels.aten(device.index(), current_native_stream(device.index()),
                 std::move(call));
  }

  // Functional: the new outputs. In-place and out=: the written arguments
  // the schema returns (the first ones; _amp_update_scale_ writes two and
  // returns one).
  std::vector<c10::IValue> returns;
  if (plan.written.empty()) {
    returns.assign(outputs.begin(), outputs.end());
  } else {
    TORCH_INTERNAL_ASSERT(schema.returns().size() <= plan.written.size(),
                          plan.name, ": unexpected returns");
    for (size_t i = 0; i < schema.returns().size(); ++i) {
      returns.push_back(args[plan.written[i]]);
    }
  }
  torch::jit::drop(*stack, nargs);
  for (auto& value : returns) {
    stack->push_back(std::move(value));
  }
}

}  // namespace

void run_family_kernel(const c10::OperatorHandle& op,
                       torch::jit::Stack* stack) {
  aten_kernel(op, c10::DispatchKeySet(), stack);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  for (const auto& family : runtime::aten_op_families()) {
    for (const auto& overload : family.overloads) {
      const std::string name = overload.substr(overload.find("::") + 2);
      m.impl(name.c_str(),
             torch::CppFunction::makeFromBoxedFunction<&aten_kernel>());
    }
  }
}

}  // namespace torch_infini::ops
