#include "ops/aten/aten_meta.h"

#include <ATen/TensorIterator.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/record_function.h>
#include <ATen/ops/empty_strided.h>

#include <algorithm>
#include <string>
#include <unordered_map>

#include "core/InfiniFunctions.h"
#include "runtime/layout_cache.h"
#include "ops/aten/aten_cpu_checks.h"
#include "ops/aten/aten_meta_fixes.h"

namespace torch_infini::ops {
namespace {

// Meta tensors standing for the call's device tensors: same sizes, strides
// and dtype; one meta tensor per distinct device tensor, so an in-place
// argument that is also an input stays one tensor.
class MetaArgs {
 public:
  c10::IValue convert(const c10::IValue& value) {
    if (value.isTensor()) {
      return meta_of(value.toTensor());
    }
    if (value.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : value.toTensorList()) {
        list.push_back(meta_of(t));
      }
      return list;
    }
    if (value.isList()) {
      // Tensor?[] (index's indices): meta too. A device mask left real would
      // let the meta function compute the result's shape from its values
      // (nonzero runs on the device), which the layouts cached by metadata
      // would then give a call with other values.
      const auto elements = value.toListRef();
      if (std::any_of(elements.begin(), elements.end(),
                      [](const c10::IValue& e) { return e.isTensor(); })) {
        c10::List<std::optional<at::Tensor>> list;
        for (const c10::IValue& e : elements) {
          list.push_back(e.isTensor()
                             ? std::optional<at::Tensor>(meta_of(e.toTensor()))
                             : std::nullopt);
        }
        return list;
      }
    }
    if (value.isDevice() && value.toDevice().type() == kInfini) {
      return c10::Device(at::kMeta);  // a factory's device
    }
    return value;
  }

  // CPU 0-dim tensors become meta tensors too: some meta functions refuse a
  // CPU tensor beside meta ones where CPU and CUDA accept a CPU scalar
  // (masked_fill_'s value). Wrapped numbers (Python scalars) stay on the
  // CPU, where PyTorch requires them to live.
  const at::Tensor& meta_of(const at::Tensor& t) {
    const bool cpu_scalar = t.defined() && t.device().is_cpu() &&
        t.dim() == 0 && !t.unsafeGetTensorImpl()->is_wrapped_number();
    if (!t.defined() || (t.device().type() != kInfini && !cpu_scalar)) {
      return t;
    }
    auto& slot = metas_[t.unsafeGetTensorImpl()];
    if (!slot.defined()) {
      slot = at::empty_strided(t.sizes(), t.strides(),
                               t.options().device(at::kMeta));
    }
    return slot;
  }

 private:
  std::unordered_map<const c10::TensorImpl*, at::Tensor> metas_;
};

// The layout CPU's TensorIterator gives an elementwise result over `args`'
// device tensors (a transposed input gives a transposed result). Python's
// meta functions, which the meta run reaches, do not always follow it.
std::optional<std::vector<int64_t>> elementwise_strides(
    c10::ArrayRef<c10::IValue> args, const std::vector<size_t>& outputs,
    at::IntArrayRef sizes) {
  // One dtype for all: only the layout is wanted.
  std::vector<at::Tensor> inputs;
  for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
    if (t.defined() && t.device().type() == kInfini &&
        std::find(outputs.begin(), outputs.end(), i) == outputs.end()) {
      inputs.push_back(at::empty_strided(
          t.sizes(), t.strides(),
          at::TensorOptions().device(at::kMeta).dtype(at::kFloat)));
    }
  });
  if (inputs.empty()) {
    return std::nullopt;
  }
  at::Tensor out;
  at::TensorIteratorConfig config;
  config.add_output(out).check_all_same_dtype(false);
  for (const at::Tensor& t : inputs) {
    config.add_const_input(t);
  }
  auto iter = config.build();
  if (iter.output().sizes() != sizes) {
    return std::nullopt;
  }
  return iter.output().strides().vec();
}

// Runs the call on meta tensors: CPU's checks (raising its errors) and the
// outputs' metadata as CPU computes it.
Layouts run_on_meta(const Plan& plan, const c10::OperatorHandle& op,
                    c10::ArrayRef<c10::IValue> args) {
  MetaArgs metas;
  torch::jit::Stack meta_stack;
  meta_stack.reserve(args.size());
  for (const auto& value : args) {
    meta_stack.push_back(metas.convert(value));
  }
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    // Not a call of the operator: the profiler has recorded the call this
    // metadata is for.
    at::DisableRecordFunctionGuard not_recorded;
    op.callBoxed(meta_stack);
  }
  const auto meta_layout = [&](const at::Tensor& meta, bool resized) {
    Layout layout;
    layout.defined = meta.defined();
    if (!layout.defined) {
      return layout;
    }
    layout.sizes = meta.sizes().vec();
    layout.dtype = meta.scalar_type();
    std::optional<std::vector<int64_t>> strides;
    if (plan.elementwise && resized) {
      strides = elementwise_strides(args, plan.written, meta.sizes());
    }
    layout.strides = strides ? *strides : meta.strides().vec();
    return layout;
  };
  Layouts layouts;
  for (size_t w : plan.written) {
    ResultLayout r;
    if (!args[w].isTensor()) {
      r.is_list = true;  // a tensor list, written in place
      layouts.push_back(std::move(r));
      continue;
    }
    // The meta run resized a meta twin of `out` as CPU would (warning where
    // CPU warns); a resized elementwise result takes its inputs' layout.
    const at::Tensor& out = args[w].toTensor();
    const at::Tensor& meta = metas.meta_of(out);
    r.tensors.push_back(meta_layout(meta, out.sizes() != meta.sizes()));
    layouts.push_back(std::move(r));
  }
  for (size_t i = 0; i < meta_stack.size(); ++i) {
    if (returns_written(op.schema(), i)) {
      continue;
    }
    const c10::IValue& result = meta_stack[i];
    ResultLayout r;
    if (result.isTensorList()) {
      r.is_list = true;
      for (const at::Tensor& t : result.toTensorList()) {
        r.tensors.push_back(meta_layout(t, /*resized=*/true));
      }
    } else {
      TORCH_INTERNAL_ASSERT(result.isTensor() || result.isNone(), plan.name,
                            ": only tensor results are supported");
      r.tensors.push_back(meta_layout(
          result.isTensor() ? result.toTensor() : at::Tensor(), true));
    }
    layouts.push_back(std::move(r));
  }
  std::vector<Layout*> results;
  for (size_t i = 0; i < layouts.size(); ++i) {
    const bool out_argument = i < plan.written.size() &&
        op.schema().arguments()[plan.written[i]].kwarg_only();
    if (i >= plan.written.size() || out_argument) {
      results.push_back(layouts[i].is_list ? nullptr
                                           : &layouts[i].tensors.front());
    }
  }
  conform_meta_layouts_to_cpu(op, args, results);
  return layouts;
}

}  // namespace

// Output metadata of a call from its meta run or, when the same call ran
// before on this thread, from the cache: Python's meta functions cost far
// more than the launch. A call reading only empty tensors is checked by
// CPU's kernel on copies (which cost nothing) before its layouts are
// cached: meta functions skip that check.
std::shared_ptr<const Layouts> output_layouts(const Plan& plan,
                                              const c10::OperatorHandle& op,
                                              c10::ArrayRef<c10::IValue> args) {
  runtime::LayoutsKey key;
  if (auto cached = runtime::find_layouts(plan, args, 0, &key, [&] {
        return run_on_meta(plan, op, args);
      })) {
    return cached;
  }
  auto layouts = std::make_shared<const Layouts>(run_on_meta(plan, op, args));
  // Checked once per key, before it is cached: a hit has the same sizes,
  // dtypes and state, so CPU would accept it as it accepted this call.
  raise_cpu_error_if_reading_only_empty(plan, op, args);
  runtime::remember_layouts(std::move(key), layouts);
  return layouts;
}

}  // namespace torch_infini::ops
