#include "ops/aten/aten_registry.h"

#include <c10/core/DispatchKey.h>
#include <torch/library.h>

#include <algorithm>
#include <memory>
#include <mutex>
#include <set>

#include "ops/aten/aten_kernel.h"
#include "ops/fallback/fallback.h"
#include "runtime/ivalue_tensors.h"

namespace torch_infini::ops {
namespace {

// Overloads whose results' shapes depend on the values (CUDA synchronizes
// for them too). A call with a boolean or byte index tensor (x[mask],
// x[mask] = v) is data-dependent as well: the kernel finds that per call.
const std::set<std::string>& data_dependent() {
  static const std::set<std::string> names = {
      "aten::nonzero", "aten::nonzero.out", "aten::_unique", "aten::_unique2",
      "aten::unique_dim", "aten::unique_consecutive",
      "aten::unique_dim_consecutive", "aten::repeat_interleave.Tensor",
      "aten::bincount", "aten::masked_select", "aten::masked_select.out",
      "aten::_unique.out", "aten::_unique2.out", "aten::unique_dim.out",
      "aten::unique_consecutive.out", "aten::unique_dim_consecutive.out",
      "aten::repeat_interleave.Tensor_out", "aten::bincount.out"};
  return names;
}

// Where an operator's values are checked decides when its errors are
// raised, as on CUDA, and for every call alike (not by whether a call of its
// kind ran before). One table, by operator name (every overload):
//   - on the host, before anything is launched (CPU and CUDA both read the
//     values there): raised at the call. Such calls run at the call, after
//     the stream;
//   - in the kernel (CUDA's device-side asserts: an index out of range):
//     raised at the next synchronization, naming the operator, the first
//     call of its kind included (its outputs' layouts are learned from CPU
//     on zero-filled copies instead of a direct run).
enum class ValueChecks { kNone, kOnHost, kOnDevice };

ValueChecks value_checks_of(const std::string& name) {
  static const std::set<std::string> on_host = {
      "aten::segment_reduce",  // the lengths' and offsets' checks
  };
  static const std::set<std::string> on_device = {
      "aten::index_select",   "aten::gather",
      "aten::take",           "aten::embedding",
      "aten::_embedding_bag", "aten::_embedding_bag_forward_only",
      "aten::max_unpool2d",   "aten::max_unpool3d",
      "aten::index_add",      "aten::index_add_",
      "aten::index_copy",     "aten::index_copy_",
      "aten::scatter",        "aten::scatter_",
      "aten::scatter_add",    "aten::scatter_add_",
      "aten::scatter_reduce", "aten::scatter_reduce_",
  };
  if (on_host.count(name)) {
    return ValueChecks::kOnHost;
  }
  return on_device.count(name) ? ValueChecks::kOnDevice : ValueChecks::kNone;
}

// CompositeExplicitAutograd overloads whose composite calls what only CPU
// runs with the tensor's device: a CPU-only DispatchStub (conj_physical_),
// or a helper operator with a CPU kernel alone (cummax's _cummax_helper,
// cholesky_solve's _cholesky_solve_helper), which no provider without CPU
// kernels has. Served like the overloads with CPU kernels: the host runtime
// runs CPU's, the Infini stack InfiniOps' operator of the whole overload
// (ATen-backed Cummax, CholeskySolve) where the build has one.
const std::set<std::string>& stub_composites() {
  static const std::set<std::string> names = {
      "aten::conj_physical_", "aten::cummax",         "aten::cummax.out",
      "aten::cummin",         "aten::cummin.out",     "aten::cholesky_solve",
      "aten::cholesky_solve.out"};
  return names;
}

bool is_tensor_type(const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (const auto* optional = t->castRaw<c10::OptionalType>()) {
    t = optional->getElementType();
  }
  if (t->kind() == c10::TypeKind::TensorType) {
    return true;
  }
  if (const auto* list = t->castRaw<c10::ListType>()) {
    return list->getElementType()->kind() == c10::TypeKind::TensorType;
  }
  return false;
}

bool takes_generator(const c10::FunctionSchema& schema) {
  return std::any_of(schema.arguments().begin(), schema.arguments().end(),
                     runtime::is_generator_argument);
}

std::string sync_reason_for(const c10::OperatorHandle& op) {
  const std::string name = c10::toString(op.operator_name());
  if (data_dependent().count(name)) {
    return "its result's shape depends on the data";
  }
  if (value_checks_of(op.schema().name()) == ValueChecks::kOnHost) {
    return "ATen checks its values on the host before it launches (CUDA "
           "reads them back too)";
  }
  for (const auto& ret : op.schema().returns()) {
    if (!is_tensor_type(ret.real_type())) {
      return "it returns a value to the host";
    }
  }
  if (takes_generator(op.schema())) {
    return "it draws on the host from the device generator's state";
  }
  return "";
}

bool view_operator(const c10::FunctionSchema& schema) {
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) {
      return true;
    }
  }
  return false;
}

bool eligible(const c10::OperatorHandle& op) {
  if (!op.hasSchema() || op.schema().name().rfind("aten::", 0) != 0) {
    return false;
  }
  using c10::DispatchKey;
  const bool cpu = op.hasKernelForDispatchKey(DispatchKey::CPU) ||
      stub_composites().count(c10::toString(op.operator_name()));
  // An overload with a CPU kernel besides its CompositeImplicitAutograd one
  // (silu_backward, mish_backward) runs its CPU kernel on the CPU too, and
  // its composite decides nothing about autograd there.
  const bool only_composite =
      op.hasKernelForDispatchKey(DispatchKey::CompositeImplicitAutograd) &&
      !op.hasKernelForDispatchKey(DispatchKey::CPU);
  return cpu && !only_composite &&
      !op.hasKernelForDispatchKey(DispatchKey::PrivateUse1) &&
      !view_operator(op.schema()) &&
      (!is_random_operator(op.schema()) || takes_generator(op.schema()));
}

std::vector<AtenEntry>& entries() {
  static std::vector<AtenEntry> table;
  return table;
}

}  // namespace

void register_generic_aten_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Kept for the life of the process: dropping it would deregister.
    static auto library = std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", c10::DispatchKey::PrivateUse1,
        __FILE__, __LINE__);
    auto& table = entries();
    for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
      const auto op = c10::Dispatcher::singleton().findOp(name);
      if (!op || !eligible(*op)) {
        continue;
      }
      const std::string qualified = c10::toString(name);
      library->impl(qualified.substr(6).c_str(), generic_aten_kernel());
      table.push_back({qualified, sync_reason_for(*op)});
    }
    std::sort(table.begin(), table.end(),
              [](const AtenEntry& a, const AtenEntry& b) {
                return a.name < b.name;
              });
  });
}

const std::vector<AtenEntry>& generic_aten_entries() { return entries(); }

std::string sync_reason_of(const c10::OperatorHandle& op) {
  return sync_reason_for(op);
}

bool synchronizes_on_cuda(const c10::OperatorHandle& op) {
  // Every reason to synchronize but drawing from the device generator's
  // state on the host, which is the host runtime's way, not CUDA's.
  return !sync_reason_for(op).empty() && !takes_generator(op.schema());
}

bool checks_values_on_device(const c10::OperatorHandle& op) {
  return value_checks_of(op.schema().name()) == ValueChecks::kOnDevice;
}

bool needs_contiguous_inputs(const c10::OperatorHandle& op) {
  // CPU's batch norm out= kernel (batch_norm_cpu_out, behind every batch
  // norm overload), given a training call's input with its channels
  // innermost in 3-D ([N, C, L] transposed from [N, L, C], as BatchNorm1d
  // after a transpose gets it), leaves the saved statistics unwritten and
  // computes the output from them (PyTorch 2.13); the functional kernels,
  // which a first call runs, are right.
  static const std::set<std::string> table = {
      "aten::native_batch_norm", "aten::_native_batch_norm_legit",
      "aten::_native_batch_norm_legit_no_training",
      "aten::_batch_norm_with_update", "aten::_batch_norm_no_update"};
  return table.count(op.schema().name()) > 0;
}

}  // namespace torch_infini::ops
