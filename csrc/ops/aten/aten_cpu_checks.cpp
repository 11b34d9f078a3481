// CPU's checks for calls laid out by a meta run (ops/aten/aten_cpu_checks.h).

#include "ops/aten/aten_cpu_checks.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/util/strides.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <optional>
#include <string>
#include <unordered_map>

#include "core/InfiniFunctions.h"
#include "ops/aten/decomposition_replay.h"
#include "ops/common.h"
#include "runtime/cache_key_bytes.h"
#include "runtime/cache_verification.h"
#include "runtime/dispatch_state.h"
#include "runtime/ivalue_tensors.h"

namespace torch_infini::ops {

std::exception_ptr cpu_error(const c10::OperatorHandle& op,
                             c10::ArrayRef<c10::IValue> args,
                             bool keep_aliases) {
  std::unordered_map<const void*, at::Tensor> storages;
  const auto cpu_copy = [&](const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kInfini) {
      return t;
    }
    if (!keep_aliases || !t.has_storage() ||
        t.storage().nbytes() % t.element_size() != 0) {
      return at::zeros_like(t, t.options().device(at::kCPU));
    }
    at::Tensor& bytes = storages[t.storage().data()];
    if (!bytes.defined() ||
        bytes.numel() < static_cast<int64_t>(t.storage().nbytes())) {
      bytes = at::zeros({static_cast<int64_t>(t.storage().nbytes())},
                        at::TensorOptions().dtype(at::kByte));
    }
    return bytes.view(t.scalar_type())
        .as_strided(t.sizes(), t.strides(), t.storage_offset());
  };
  torch::jit::Stack cpu;
  for (const c10::IValue& value : args) {
    cpu.push_back(runtime::map_tensors(value, cpu_copy));
  }
  try {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  } catch (const std::exception&) {
    return std::current_exception();
  }
  return nullptr;
}

namespace {

// Warnings of a kernel run only for its verdict.
class DiscardedWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& /*warning*/) override {}
};

// The call's arguments for its CPU kernel: each device tensor replaced by
// `copy(tensor)`, each generator by a fresh CPU one (so that nothing in the
// call's generators changes).
template <typename Copy>
torch::jit::Stack cpu_arguments(const c10::OperatorHandle& op,
                                c10::ArrayRef<c10::IValue> args, Copy copy) {
  const auto& schema = op.schema();
  torch::jit::Stack cpu;
  for (size_t i = 0; i < args.size(); ++i) {
    cpu.push_back(i < schema.arguments().size() &&
                          runtime::is_generator_argument(schema.arguments()[i])
                      ? c10::IValue(at::make_generator<at::CPUGeneratorImpl>())
                      : runtime::map_tensors(args[i], copy));
  }
  return cpu;
}

}  // namespace

std::exception_ptr cpu_dtype_refusal(const c10::OperatorHandle& op,
                                     c10::ArrayRef<c10::IValue> args) {
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::CPU)) {
    return nullptr;
  }
  // A factory writing into out= (arange.start_out) reads no tensor whose
  // dtype a kernel could refuse, and its CPU kernel would allocate and
  // fill the whole result (its size comes from the numbers): not asked.
  const auto& arguments = op.schema().arguments();
  bool reads_device_tensor = false;
  runtime::for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
    const auto* alias = i < arguments.size() ? arguments[i].alias_info()
                                             : nullptr;
    reads_device_tensor = reads_device_tensor ||
        (t.defined() && t.device().type() == kInfini &&
         (alias == nullptr || !alias->isWrite()));
  });
  if (!reads_device_tensor) {
    return nullptr;
  }
  const auto stand_in = [](const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kInfini) {
      return t;
    }
    return at::zeros(std::vector<int64_t>(t.dim(), 1),
                     t.options().device(at::kCPU));
  };
  torch::jit::Stack cpu = cpu_arguments(op, args, stand_in);
  try {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    // Unseen by Python dispatch modes: the calls CPU's kernel makes inside
    // (nonzero's item()) would enter the recording of an enclosing
    // decomposition.
    const c10::impl::ExcludeDispatchKeyGuard no_python(c10::DispatchKeySet(
        {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
    // Nor heard: what it warns of is the stand-ins' (an out= of another
    // size), and a warning makes the decomposition's recording unreplayable.
    DiscardedWarnings discarded;
    const c10::WarningUtils::WarningHandlerGuard quiet(&discarded);
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  } catch (const c10::NotImplementedError& e) {
    // AT_DISPATCH's message; another NotImplementedError (a sparse or
    // quantized path) is not about the dtypes.
    if (std::string(e.what()).find(" not implemented for '") !=
        std::string::npos) {
      return std::current_exception();
    }
  } catch (const std::exception&) {
    // A check of the stand-ins' shapes or values: not the dtypes.
  }
  return nullptr;
}

Layouts cpu_layouts(const Plan& plan, const c10::OperatorHandle& op,
                    c10::ArrayRef<c10::IValue> args,
                    runtime::CopiedValues values) {
  std::unordered_map<const void*, at::Tensor> storages;
  const auto cpu_copy = [&](const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kInfini) {
      return t;
    }
    at::Tensor& bytes = storages[t.storage().data()];
    const auto nbytes = static_cast<int64_t>(t.storage().nbytes());
    if (!bytes.defined() && values != runtime::CopiedValues::kDevice) {
      bytes = at::full({nbytes},
                       values == runtime::CopiedValues::kZeros ? 0 : 1,
                       at::TensorOptions().dtype(at::kByte));
    } else if (!bytes.defined()) {
      const at::Tensor on_device =
          at::empty({0}, t.options().dtype(at::kByte))
              .set_(t.storage(), 0, {nbytes}, {1});
      bytes = on_device.to(at::kCPU);  // through the runtime, in stream order
    }
    at::Tensor copy = bytes.view(t.scalar_type())
                          .as_strided(t.sizes(), t.strides(),
                                      t.storage_offset());
    copy._set_conj(t.is_conj());
    copy._set_neg(t.is_neg());
    return copy;
  };
  torch::jit::Stack cpu = cpu_arguments(op, args, cpu_copy);
  const auto& schema = op.schema();
  std::vector<at::Tensor> written;
  for (size_t w : plan.written) {
    written.push_back(cpu[w].isTensor() ? cpu[w].toTensor() : at::Tensor());
  }
  {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  }
  // As run_direct lays them out: written arguments as they are after the
  // call, new results as the infini tensors it copies them into (dense
  // ones keep their strides, the others are made contiguous).
  Layouts layouts;
  for (size_t k = 0; k < plan.written.size(); ++k) {
    ResultLayout r;
    r.is_list = !args[plan.written[k]].isTensor();
    if (!r.is_list) {
      r.tensors.push_back(layout_of(written[k]));
    }
    layouts.push_back(std::move(r));
  }
  const auto as_copied = [](const at::Tensor& t) {
    Layout layout = layout_of(t);
    if (t.defined() && !t.is_non_overlapping_and_dense()) {
      const auto strides = c10::contiguous_strides(t.sizes());
      layout.strides.assign(strides.begin(), strides.end());
    }
    return layout;
  };
  for (size_t i = 0; i < schema.returns().size(); ++i) {
    if (returns_written(schema, i)) {
      continue;
    }
    ResultLayout r;
    if (cpu[i].isTensorList()) {
      r.is_list = true;
      for (const at::Tensor& t : cpu[i].toTensorList()) {
        r.tensors.push_back(as_copied(t));
      }
    } else {
      r.tensors.push_back(as_copied(cpu[i].isTensor() ? cpu[i].toTensor()
                                                      : at::Tensor()));
    }
    layouts.push_back(std::move(r));
  }
  return layouts;
}

[[noreturn]] void raise_cpu_error(const c10::OperatorHandle& op,
                                  c10::ArrayRef<c10::IValue> args,
                                  const std::exception_ptr& fallback_error) {
  const std::exception_ptr error = cpu_error(op, args);
  std::rethrow_exception(error ? error : fallback_error);
}

namespace {

// The key of CPU's verdict on a call over aliased memory: the call exactly,
// as a decomposition replay keys it (replay_key: the overload, the state,
// every argument's metadata, offset and value, a CPU scalar's too, and which
// tensors are the same tensor or share memory), then each device tensor's
// storage size. That is all cpu_error(keep_aliases) builds its CPU copies
// from; they hold zeros, so the verdict is CPU's checks of metadata and
// aliasing alone. None where an argument cannot be keyed exactly.
std::optional<std::string> aliasing_key(const Plan& plan,
                                        c10::ArrayRef<c10::IValue> args,
                                        const runtime::DispatchState& state) {
  std::optional<std::string> key = replay_key(plan.name, args, state);
  if (key) {
    runtime::for_each_tensor(args, [&key](const at::Tensor& t, size_t) {
      const int64_t nbytes = t.defined() && t.has_storage()
          ? static_cast<int64_t>(t.storage().nbytes())
          : -1;
      runtime::append_tagged(*key, 'n', nbytes);
    });
  }
  return key;
}

}  // namespace

std::exception_ptr cpu_error_on_aliases(const Plan& plan,
                                        const c10::OperatorHandle& op,
                                        c10::ArrayRef<c10::IValue> args) {
  // The calls CPU accepted, per thread (no lock), with the state each was
  // tried under (in the key; the verification mode names what differs).
  // Bounded as the other call-keyed caches are.
  thread_local std::unordered_map<std::string, runtime::DispatchState> accepted;
  const runtime::DispatchState state = runtime::DispatchState::current();
  const std::optional<std::string> key = aliasing_key(plan, args, state);
  const auto it = key ? accepted.find(*key) : accepted.end();
  if (it == accepted.end()) {
    std::exception_ptr error = cpu_error(op, args, /*keep_aliases=*/true);
    if (!error && key) {
      if (accepted.size() >= 1024) {
        accepted.clear();
      }
      accepted.emplace(*key, state);
    }
    return error;
  }
  if (runtime::verify_caches()) {
    const runtime::DispatchState was = it->second;
    if (const std::exception_ptr error = cpu_error(op, args, true)) {
      std::string now;
      try {
        std::rethrow_exception(error);
      } catch (const std::exception& e) {
        now = e.what();
      }
      runtime::raise_stale_cache("aliased calls CPU accepts", plan.name,
                                 "cached: CPU accepts; tried again, CPU "
                                 "raises: " + now,
                                 was);
    }
    runtime::count_verified_hit("aliased calls CPU accepts");
  }
  return nullptr;
}

void check_full_aliasing(const Plan& plan, const c10::OperatorHandle& op,
                         c10::ArrayRef<c10::IValue> args,
                         bool kernels_see_aliases) {
  if (plan.written.empty()) {
    return;
  }
  bool aliased = false;
  for (size_t w : plan.written) {
    if (!args[w].isTensor() || !args[w].toTensor().defined()) {
      continue;
    }
    const at::Tensor& out = args[w].toTensor();
    for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
      aliased = aliased ||
          (t.defined() && t.device() == out.device() && out.numel() > 0 &&
           std::find(plan.written.begin(), plan.written.end(), i) ==
               plan.written.end() &&
           at::get_overlap_status(out, t) == at::MemOverlapStatus::Full);
    });
  }
  if (!aliased) {
    return;
  }
  if (const std::exception_ptr error = cpu_error_on_aliases(plan, op, args)) {
    std::rethrow_exception(error);
  }
  TORCH_CHECK_NOT_IMPLEMENTED(
      kernels_see_aliases || plan.pointwise, plan.name, " on infini (",
      provider_label(), "): an output is the memory of an input, which the ",
      "InfiniOps kernel would read after writing; pass a separate output, or ",
      "use the host runtime (TORCH_INFINI_PROVIDER=host)");
}

bool reads_only_empty_tensors(const Plan& plan,
                              c10::ArrayRef<c10::IValue> args) {
  bool any = false;
  bool all_empty = true;
  for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
    if (!t.defined() || t.device().type() != kInfini ||
        std::find(plan.written.begin(), plan.written.end(), i) !=
            plan.written.end()) {
      return;
    }
    any = true;
    all_empty = all_empty && t.numel() == 0;
  });
  return any && all_empty;
}

void raise_cpu_error_if_reading_only_empty(const Plan& plan,
                                           const c10::OperatorHandle& op,
                                           c10::ArrayRef<c10::IValue> args) {
  if (reads_only_empty_tensors(plan, args)) {
    if (const std::exception_ptr error = cpu_error(op, args)) {
      std::rethrow_exception(error);
    }
  }
}

}  // namespace torch_infini::ops
