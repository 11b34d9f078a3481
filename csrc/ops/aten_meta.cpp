#include "ops/aten_meta.h"

#include <ATen/TensorIterator.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty_strided.h>

#include <string>
#include <unordered_map>

#include "core/InfiniFunctions.h"

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
std::vector<Layout> run_on_meta(const Plan& plan, const c10::OperatorHandle& op,
                                c10::ArrayRef<c10::IValue> args) {
  MetaArgs metas;
  torch::jit::Stack meta_stack;
  meta_stack.reserve(args.size());
  for (const auto& value : args) {
    meta_stack.push_back(metas.convert(value));
  }
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.callBoxed(meta_stack);
  }
  const auto layout_of = [&](const at::Tensor& meta, bool resized) {
    Layout layout;
    layout.defined = meta.defined();
    if (!layout.defined) {
      return layout;
    }
    layout.sizes = meta.sizes().vec();
    layout.dtype = meta.scalar_type();
    std::optional<std::vector<int64_t>> strides;
    if (plan.family->elementwise && resized) {
      strides = elementwise_strides(args, plan.written, meta.sizes());
    }
    layout.strides = strides ? *strides : meta.strides().vec();
    return layout;
  };
  std::vector<Layout> layouts;
  if (plan.written.empty()) {
    for (const auto& result : meta_stack) {
      TORCH_INTERNAL_ASSERT(result.isTensor(), plan.name,
                            ": only tensor results are supported");
      layouts.push_back(layout_of(result.toTensor(), /*resized=*/true));
    }
    return layouts;
  }
  for (size_t w : plan.written) {
    if (!args[w].isTensor()) {
      layouts.emplace_back();  // a tensor list, written in place
      continue;
    }
    // The meta run resized a meta twin of `out` as CPU would (warning where
    // CPU warns); a resized elementwise result takes its inputs' layout.
    const at::Tensor& out = args[w].toTensor();
    const at::Tensor& meta = metas.meta_of(out);
    layouts.push_back(layout_of(meta, out.sizes() != meta.sizes()));
  }
  return layouts;
}

// What a meta run depends on: every argument's metadata and value, tensors
// by sizes, strides and dtype (a CPU scalar by dtype alone). False where an
// argument is of a kind not keyed (the call then always runs on meta).
bool append_key(std::string& key, const c10::IValue& value) {
  const auto bytes = [&](const void* p, size_t n) {
    key.append(static_cast<const char*>(p), n);
  };
  const auto tensor = [&](const at::Tensor& t) {
    key.push_back(!t.defined() ? 'u' : t.device().is_cpu() ? 'c' : 't');
    if (!t.defined()) {
      return;
    }
    const auto dtype = t.scalar_type();
    bytes(&dtype, sizeof(dtype));
    if (t.device().is_cpu()) {
      key.push_back(t.unsafeGetTensorImpl()->is_wrapped_number() ? 'w' : 'n');
      return;
    }
    const int64_t dim = t.dim();
    bytes(&dim, sizeof(dim));
    bytes(t.sizes().data(), dim * sizeof(int64_t));
    bytes(t.strides().data(), dim * sizeof(int64_t));
  };
  if (value.isTensor()) {
    tensor(value.toTensor());
  } else if (value.isTensorList()) {
    key.push_back('L');
    for (const at::Tensor& t : value.toTensorList()) {
      tensor(t);
    }
    key.push_back(';');
  } else if (value.isNone()) {
    key.push_back('N');
  } else if (value.isInt()) {
    key.push_back('i');
    const int64_t v = value.toInt();
    bytes(&v, sizeof(v));
  } else if (value.isDouble()) {
    key.push_back('d');
    const double v = value.toDouble();
    bytes(&v, sizeof(v));
  } else if (value.isBool()) {
    key.push_back(value.toBool() ? 'B' : 'b');
  } else if (value.isIntList()) {
    key.push_back('I');
    for (const int64_t v : value.toIntList()) {
      bytes(&v, sizeof(v));
    }
    key.push_back(';');
  } else if (value.isString()) {
    key.push_back('s');
    key += value.toStringRef();
    key.push_back(';');
  } else {
    return false;
  }
  return true;
}

}  // namespace

// Output metadata of a call, from its meta run or, when the same call
// (same operator, argument metadata and values) ran before on this thread,
// from a cache: Python's meta functions cost far more than the launch.
// A hit allocates nothing: the key is built in a per-thread buffer and the
// entry is shared, so it outlives a cache cleared by a later call.
std::shared_ptr<const std::vector<Layout>> output_layouts(
    const Plan& plan, const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> args) {
  constexpr size_t kMaxEntries = 4096;
  thread_local std::unordered_map<std::string,
                                  std::shared_ptr<const std::vector<Layout>>>
      cache;
  thread_local std::string buffer;
  buffer.clear();
  const Plan* plan_address = &plan;
  buffer.append(reinterpret_cast<const char*>(&plan_address),
                sizeof(plan_address));
  bool keyed = true;
  for (const auto& value : args) {
    keyed = keyed && append_key(buffer, value);
  }
  if (keyed) {
    const auto it = cache.find(buffer);
    if (it != cache.end()) {
      return it->second;
    }
  }
  std::string key = buffer;  // the meta run may reach this function again
  auto layouts = std::make_shared<const std::vector<Layout>>(
      run_on_meta(plan, op, args));
  if (keyed) {
    if (cache.size() >= kMaxEntries) {
      cache.clear();
    }
    cache.emplace(std::move(key), layouts);
  }
  return layouts;
}

}  // namespace torch_infini::ops
