#include "ops/aten/aten_decompose.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/record_function.h>
#include <c10/util/accumulate.h>

#include <algorithm>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/InfiniFunctions.h"
#include "ops/aten/aten_cpu_checks.h"
#include "ops/aten/aten_meta.h"
#include "ops/common.h"
#include "ops/decomposition_scope.h"
#include "ops/fallback/fallback.h"
#include "ops/op_coverage.h"
#include "ops/scalar_cache.h"
#include "runtime/cache_key_bytes.h"
#include "runtime/cache_verification.h"
#include "runtime/dispatch_state.h"

namespace torch_infini::ops {
namespace {

std::atomic<DecomposeHook> installed{nullptr};

// Overloads whose decomposition met a refused operator, with that refusal:
// not tried again (a failed try costs a Python call, and leaves its inner
// calls in profiles). By overload, its tensors' dtypes, ranks and devices,
// its int, float, bool and string arguments (a decomposition may refuse a
// 3-D convolution and serve a 2-D one, polygamma's n = 2 and not n = 1, a
// p-norm but not p = 1), and the state the decomposition's Python code
// reads (runtime/dispatch_state.h); and the decompositions running on
// this thread, within which it was refused: an overload met again within
// its own decomposition is not decomposed (decomposition_scope.h), so
// where a cycle closes words the refusal (arange's decomposition calls
// cumsum, whose decomposition calls arange: refused alone, cumsum's refusal
// names arange's; within arange's decomposition, it names arange's kernel).
class RefusedDecompositions {
 public:
  struct Refusal {
    std::string reason;
    runtime::DispatchState state;  // what it was refused under (in the key)
  };
  static std::string key(const std::string& name,
                         c10::ArrayRef<c10::IValue> args,
                         const runtime::DispatchState& state) {
    std::string key = name;
    state.append_to(key);
    key += "(within " + decompositions_in_progress() + ")";
    for (const c10::IValue& v : args) {
      if (v.isIntList()) {
        const auto list = v.toIntList();
        runtime::append_tagged(key, 'L', list.size());
        for (const int64_t i : list) {
          runtime::append_tagged(key, 'i', i);
        }
      } else {
        // Exactly, as every call-keyed cache writes them (None, numbers
        // by their bits, bool apart from int); tensors follow below.
        runtime::append_plain_value(key, v);
      }
    }
    for_each_tensor(args, [&](const at::Tensor& t, size_t) {
      key += t.defined() ? c10::toString(t.scalar_type()) +
              std::to_string(t.dim())
                         : "-";
      key += t.defined() && t.device().is_cpu() ? "c," : ",";
    });
    return key;
  }
  std::optional<Refusal> find(const std::string& key) const {
    std::lock_guard<std::mutex> lock(mutex_);  // a lookup, no device call
    const auto it = refused_.find(key);
    if (it == refused_.end()) {
      return std::nullopt;
    }
    return it->second;
  }
  void add(std::string key, Refusal refusal) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (refused_.size() >= 4096) {
      refused_.clear();  // bounded: a refused call of ever new sizes
    }
    refused_.emplace(std::move(key), std::move(refusal));
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    refused_.clear();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Refusal> refused_;
};

RefusedDecompositions& refused_decompositions() {
  static RefusedDecompositions refused;
  return refused;
}

// Whether an in-place call's self (argument 0) overlaps itself or shares
// memory with another argument.
bool self_shares_memory(c10::ArrayRef<c10::IValue> args) {
  if (args.empty() || !args[0].isTensor() || !args[0].toTensor().defined()) {
    return false;
  }
  const at::Tensor& self = args[0].toTensor();
  if (self.numel() == 0) {
    return false;
  }
  bool shares = at::has_internal_overlap(self) == at::MemOverlap::Yes;
  for_each_tensor(args.slice(1), [&](const at::Tensor& t, size_t) {
    if (shares || !t.defined() || t.device() != self.device()) {
      return;
    }
    const at::MemOverlapStatus status = at::get_overlap_status(self, t);
    // ATen cannot tell for a self that is not dense (a diagonal, a column:
    // x.diagonal()[mask] = v): only memory of the same storage may overlap.
    shares = status == at::MemOverlapStatus::Full ||
             status == at::MemOverlapStatus::Partial ||
             (status == at::MemOverlapStatus::TooHard &&
              t.storage().is_alias_of(self.storage()));
  });
  return shares;
}

// c10's range-checked conversion of a number (c10::checked_convert: "value
// cannot be converted to type float without overflow"), known by its
// message: c10 raises it as a plain c10::Error. PyTorch's decompositions
// build 0-dim tensors of a number with it (scalar_tensor, torch.tensor with
// a dtype), where CPU's kernels cast a wrapped number unchecked (1e39 to
// float32 is inf, 300 to uint8 wraps).
bool is_checked_number_conversion(const std::string& what) {
  return what.find("cannot be converted to type") != std::string::npos &&
      what.find("without overflow") != std::string::npos;
}

// The call's CPU 0-dim tensors that it reads (scalars, which CUDA's
// kernels and this provider's accept beside device tensors: index_fill's
// value) as copies on its device, for its decomposition: the operators that
// computes it with may not accept a CPU tensor where the overload does
// (index_fill's value becomes index_copy's source). Wrapped numbers (Python
// scalars) stay on the CPU, where PyTorch keeps them, and type promotion
// reads them apart from 0-dim tensors; a CPU tensor of more dimensions
// stays too, refused as CUDA refuses it.
void move_cpu_scalars(const Plan& plan, torch::jit::Stack* stack,
                      size_t nargs) {
  const auto args = torch::jit::last(*stack, nargs);
  std::optional<c10::Device> device;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (t.defined() && t.device().type() == kInfini && !device) {
      device = t.device();
    }
  });
  if (!device) {
    return;
  }
  for (size_t i = 0; i < nargs; ++i) {
    c10::IValue& value = (*stack)[stack->size() - nargs + i];
    if (!value.isTensor() ||
        std::find(plan.written.begin(), plan.written.end(), i) !=
            plan.written.end()) {
      continue;
    }
    const at::Tensor& t = value.toTensor();
    if (t.defined() && t.device().is_cpu() && t.dim() == 0 &&
        !t.unsafeGetTensorImpl()->is_wrapped_number()) {
      // The cached device copy (copied once per value, as CUDA would pass
      // it to its kernel instead of waiting on a copy; set by a fill kernel
      // during a capture), cloned: the decomposition's results may be
      // views of it.
      value = device_scalar(t.item(), t.scalar_type(), *device).clone();
    }
  }
}

}  // namespace

void set_decompose_hook(DecomposeHook hook) { installed.store(hook); }

void forget_decomposition_runs() {
  refused_decompositions().clear();
  clear_replays();
}

bool try_decompose(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                   std::string* refusal, Recording* recording) {
  const DecomposeHook hook = installed.load();
  if (hook == nullptr || decomposing(op.schema())) {
    return false;
  }
  const DecompositionScope scope(op.schema());
  return hook(op, stack, refusal, recording);
}

namespace {

// The decomposition of a call: replayed where it was recorded for the
// call's key, else run by the hook, recording it where the call can be
// keyed. The verification mode runs and records every hit again and
// compares the two programs.
bool run_or_replay(const Plan& plan, const c10::OperatorHandle& op,
                   torch::jit::Stack* stack, std::string* refusal,
                   const runtime::DispatchState& state) {
  const size_t nargs = op.schema().arguments().size();
  const auto args = torch::jit::last(*stack, nargs);
  std::optional<std::string> key = replay_key(plan.name, args, state);
  const std::shared_ptr<const ReplayProgram> known =
      key ? find_replay(*key) : nullptr;
  if (known != nullptr && !runtime::verify_caches()) {
    if (!known->replayable()) {
      return try_decompose(op, stack, refusal);
    }
    if (decomposing(op.schema())) {
      return false;  // as try_decompose: not within its own decomposition
    }
    const DecompositionScope scope(op.schema());
    return known->run(stack, nargs, refusal);
  }
  // CPU's refusal of the dtypes, which a decomposition computing in float32
  // or promoting would not raise (softplus of int32, zeta of float16): asked
  // where the Python runs, not on a replay (its key holds the dtypes).
  if (const std::exception_ptr error = cpu_dtype_refusal(op, args)) {
    std::rethrow_exception(error);
  }
  if (!key) {
    return try_decompose(op, stack, refusal);
  }
  const std::vector<c10::IValue> saved(args.begin(), args.end());
  Recording recording;
  if (!try_decompose(op, stack, refusal, &recording)) {
    return false;  // (a replay meets the same refusal, of an operator it calls)
  }
  const auto results = torch::jit::last(*stack, op.schema().returns().size());
  std::shared_ptr<const ReplayProgram> fresh =
      ReplayProgram::build(saved, recording, results, state);
  // A run that warned is not replayed (the replay would not warn); a
  // warning PyTorch issues once per process (TORCH_WARN_ONCE: searchsorted's
  // of a non-contiguous input) is not issued again, so a later run of the
  // same key records a replayable sequence. Which warnings have fired is
  // process state no key can hold, and the cached answer, running the
  // Python every time, is right either way: the verification mode takes it.
  const bool warned_once = known != nullptr && !known->replayable() &&
      known->not_replayable().rfind("it warned", 0) == 0 &&  // recording.py
      fresh->replayable();
  if (known == nullptr) {
    remember_replay(std::move(*key), std::move(fresh));
  } else if (fresh->signature() != known->signature() && !warned_once) {
    runtime::raise_stale_cache(
        "decomposition replays", c10::toString(op.operator_name()),
        "recorded as " +
            (known->replayable() ? std::string("one sequence of calls")
                                 : "not replayable (" + known->not_replayable() + ")") +
            ", but now " +
            (fresh->replayable() ? std::string("another sequence of calls")
                                 : "not replayable (" + fresh->not_replayable() + ")"),
        known->state());
  } else {
    runtime::count_verified_hit("decomposition replays");
  }
  return true;
}

}  // namespace

bool decompose(const Plan& plan, const c10::OperatorHandle& op,
               torch::jit::Stack* stack, std::string* refusal) {
  const bool writes_only_outs =
      std::all_of(plan.written_out.begin(), plan.written_out.end(),
                  [](bool out) { return out; });
  // In place on self alone: decomposed as its functional overload, then a
  // copy into self (torch_infini/decompositions/), which is written last.
  const bool in_place_on_self = plan.written.size() == 1 &&
      plan.written[0] == 0 && plan.returns_only_written;
  if ((!writes_only_outs && !in_place_on_self) ||
      is_random_operator(op.schema())) {
    return false;
  }
  const auto& schema = op.schema();
  if (in_place_on_self &&
      self_shares_memory(torch::jit::last(*stack, schema.arguments().size()))) {
    // The decomposition reads every argument before writing self; CPU's
    // kernel may not, or refuses the call: CPU decides, on memory aliased
    // alike, and where it accepts the call the decomposition does not run.
    const auto args = torch::jit::last(*stack, schema.arguments().size());
    if (const std::exception_ptr error = cpu_error_on_aliases(plan, op, args)) {
      std::rethrow_exception(error);
    }
    return false;
  }
  // The new results' layouts from the meta run, as every other call on the
  // provider has them (none where the overload has no meta function): a
  // decomposition may return other strides or dtypes. A call CPU refuses
  // raises CPU's error, not the decomposition's own (worded otherwise): the
  // meta run's, confirmed on CPU copies, and for a call reading only empty
  // tensors the checks the meta function skips (output_layouts).
  const auto args = torch::jit::last(*stack, schema.arguments().size());
  std::shared_ptr<const Layouts> layouts;
  try {
    layouts = output_layouts(plan, op, args);
  } catch (const std::exception&) {
    if (const std::exception_ptr error = cpu_error(op, args)) {
      std::rethrow_exception(error);
    }
  }
  const runtime::DispatchState state = runtime::DispatchState::current();
  std::string key = RefusedDecompositions::key(plan.name, args, state);
  const std::optional<RefusedDecompositions::Refusal> known =
      refused_decompositions().find(key);
  if (known && !runtime::verify_caches()) {
    *refusal = known->reason;
    return false;
  }
  // The arguments, kept: the stack holds the results once it ran, and
  // holds them again where it did not (CPU scalars moved for the try).
  const std::vector<c10::IValue> saved(args.begin(), args.end());
  move_cpu_scalars(plan, stack, saved.size());
  const auto restore = [&] {
    std::copy(saved.begin(), saved.end(), stack->end() - saved.size());
  };
  bool ran = false;
  try {
    // The decomposition is the overload's kernel: profiles and the coverage
    // record show the overload, not its parts (nor the parts of a try that
    // meets a refused operator and gives way to the fallback).
    at::DisableRecordFunctionGuard as_one_kernel;
    ran = run_or_replay(plan, op, stack, refusal, state);
  } catch (const std::exception& e) {
    // CPU's wording where CPU refuses the call too (a float index), the
    // decomposition's where only the values refute it (an index out of
    // range).
    if (const std::exception_ptr error = cpu_error(op, saved)) {
      std::rethrow_exception(error);
    }
    // CPU accepts the call, and the decomposition met a number it converts
    // with a range check: the decomposition cannot compute this call as
    // CPU does, which is a refusal (the next way of the unserved order),
    // not the call's error.
    const std::string what = e.what();
    if (!is_checked_number_conversion(what)) {
      throw;
    }
    *refusal = "its decomposition converts a number with a range check "
        "that CPU's kernel does not make (" +
        what.substr(0, what.find('\n')) + ")";
    ran = false;
  }
  if (!ran) {
    restore();
  }
  if (known) {  // the verification mode: the try again must refuse alike
    if (ran || *refusal != known->reason) {
      runtime::raise_stale_cache(
          "refused decompositions", c10::toString(op.operator_name()),
          "cached as refused (" + known->reason + "), but " +
              (ran ? std::string("the decomposition runs now")
                   : "refused now for another reason (" + *refusal + ")"),
          known->state);
    }
    runtime::count_verified_hit("refused decompositions");
    return false;
  }
  if (!ran) {
    if (!refusal->empty()) {
      refused_decompositions().add(std::move(key), {*refusal, state});
    }
    return false;
  }
  coverage::served_as(op.operator_name(), coverage::Kind::kComposite);
  if (layouts == nullptr) {
    return true;
  }
  const size_t nreturns = schema.returns().size();
  size_t next_result = plan.written.size();
  for (size_t i = 0; i < nreturns; ++i) {
    if (returns_written(schema, i)) {
      continue;
    }
    c10::IValue& value = (*stack)[stack->size() - nreturns + i];
    const ResultLayout& result = (*layouts)[next_result++];
    if (result.is_list || !value.isTensor() || !value.toTensor().defined()) {
      continue;
    }
    const at::Tensor t = value.toTensor();
    const Layout& meta = result.tensors.front();
    if (!meta.defined) {
      continue;
    }
    // A result CPU returns empty that the decomposition computes (batch
    // norm's saved mean and inverse deviation in eval mode, one value per
    // channel there): its values have no counterpart in CPU's, so the
    // result is CPU's empty one.
    if (c10::multiply_integers(meta.sizes) == 0 && t.numel() != 0) {
      value = empty_strided_on_current_device(meta.sizes, meta.strides,
                                              meta.dtype);
      continue;
    }
    if (t.scalar_type() == meta.dtype && t.strides().vec() == meta.strides) {
      continue;
    }
    TORCH_CHECK(t.sizes().vec() == meta.sizes, "infini: PyTorch's "
                "decomposition of ", op.operator_name(), " returned result ", i,
                " of shape ", t.sizes(), " where its meta function gives ",
                c10::IntArrayRef(meta.sizes));
    // A result computed in less precision than CPU returns it (a bfloat16
    // group norm's float32 statistics, which the decomposition rounds to
    // bfloat16) would not be CPU's values once widened.
    const c10::ScalarType got = t.scalar_type();
    TORCH_CHECK_NOT_IMPLEMENTED(
        !c10::isFloatingType(got) || !c10::isFloatingType(meta.dtype) ||
            c10::elementSize(got) > c10::elementSize(meta.dtype) ||
            (c10::elementSize(got) == c10::elementSize(meta.dtype) &&
             got == meta.dtype),
        op.operator_name(), " on infini (", provider_label(), "): InfiniOps ",
        "has no kernel for it, and PyTorch's decomposition of it computes ",
        "result ", i, " in ", got, ", where CPU returns ", meta.dtype,
        "; use the host runtime (TORCH_INFINI_PROVIDER=host)");
    value = empty_strided_on_current_device(meta.sizes, meta.strides,
                                            meta.dtype)
                .copy_(t);
  }
  return true;
}

}  // namespace torch_infini::ops
