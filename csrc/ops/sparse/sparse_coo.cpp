// Sparse COO tensors on infini (the SparsePrivateUse1 key): enough to train
// with sparse gradients (nn.Embedding/EmbeddingBag(sparse=True) with SGD,
// Adagrad or SparseAdam) on the host runtime.
//
// A sparse tensor's structure is metadata over two dense infini tensors
// (indices and values): ATen's device-generic functions make and take it
// apart (creation, _indices, _values, nnz, resizing), registered here as
// they are for CPU and CUDA. Every other operator on a sparse infini
// tensor runs, generically, as CPU's kernel on CPU copies of its tensors,
// with its results copied back (the written ones into the very tensors the
// call wrote): the host runtime's kernels are CPU's, so the values are
// CPU's bit for bit. These calls synchronize, as the host runtime's direct
// runs do. On a provider that does not run CPU kernels (the Infini stack:
// InfiniOps has no sparse kernels) every such operator is refused, naming
// itself.

#include <ATen/SparseTensorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/native/SparseTensorUtils.h>
#include <ATen/ops/_coalesced_native.h>
#include <ATen/ops/_indices_native.h>
#include <ATen/ops/_nnz_native.h>
#include <ATen/ops/_sparse_coo_tensor_unsafe.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_and_tensors_native.h>
#include <ATen/ops/_sparse_coo_tensor_with_dims_native.h>
#include <ATen/ops/_values_native.h>
#include <ATen/ops/dense_dim_native.h>
#include <ATen/ops/empty_native.h>
#include <ATen/ops/indices_native.h>
#include <ATen/ops/is_coalesced_native.h>
#include <ATen/ops/sparse_dim_native.h>
#include <ATen/ops/sparse_resize_and_clear_native.h>
#include <ATen/ops/sparse_resize_native.h>
#include <ATen/ops/values_native.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/InfiniFunctions.h"
#include "ops/common.h"
#include "ops/sparse/sparse_coo.h"
#include "runtime/ivalue_tensors.h"
#include "runtime/kernels.h"

namespace torch_infini::ops {
namespace {

bool on_infini(const at::Tensor& t) {
  return t.defined() && t.device().type() == kInfini;
}

// A CPU copy of an infini tensor (sparse: its indices and values copied,
// its coalesced flag kept); other tensors as they are.
at::Tensor to_cpu(const at::Tensor& t) {
  if (!on_infini(t)) {
    return t;
  }
  if (!t.is_sparse()) {
    return t.cpu();
  }
  return at::_sparse_coo_tensor_unsafe(t._indices().cpu(), t._values().cpu(),
                                       t.sizes(),
                                       t.options().device(at::kCPU),
                                       t.is_coalesced());
}

// A CPU result on `device`.
at::Tensor to_device(const at::Tensor& t, c10::Device device) {
  if (!t.defined() || !t.device().is_cpu()) {
    return t;
  }
  return t.is_sparse() ? sparse_to_device(t, device) : t.to(device);
}

// `into` (an infini tensor the call wrote) takes a CPU result's contents.
void write_back(const at::Tensor& into, const at::Tensor& result) {
  if (!into.is_sparse()) {
    if (!into.is_same(result)) {
      into.copy_(result);
    }
    return;
  }
  at::sparse::get_sparse_impl(into)->raw_resize_(
      result.sparse_dim(), result.dense_dim(), result.sizes());
  at::sparse::alias_into_sparse(into, result._indices().to(into.device()),
                                result._values().to(into.device()));
  into._coalesced_(result.is_coalesced());
}

bool writes(const c10::Argument& arg) {
  return arg.alias_info() != nullptr && arg.alias_info()->isWrite();
}

void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  TORCH_CHECK_NOT_IMPLEMENTED(
      runtime::kernels().has_sparse_kernels(), schema.operator_name(),
      " on infini (", provider_label(), "): sparse tensors are served by the "
      "host runtime only (TORCH_INFINI_PROVIDER=host), InfiniOps has no "
      "sparse kernels; use dense tensors (.to_dense()), or run the sparse "
      "code on the CPU");
  const size_t nargs = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - nargs, stack->end());
  std::optional<c10::Device> device;
  torch::jit::Stack cpu;
  for (const c10::IValue& value : args) {
    runtime::map_tensors(value, [&device](const at::Tensor& t) {
      if (on_infini(t) && !device) {
        device = t.device();
      }
      return t;
    });
    if (value.isDevice() && value.toDevice().type() == kInfini) {
      device = value.toDevice();
      cpu.emplace_back(c10::Device(at::kCPU));
      continue;
    }
    cpu.push_back(runtime::map_tensors(value, to_cpu));
  }
  TORCH_CHECK(device.has_value(), schema.operator_name(),
              ": no infini tensor among its arguments");
  c10::DeviceGuard guard(*device);
  // A Device argument naming the CPU (sparse.to('cpu')) keeps the results
  // there; otherwise they come back to the device.
  bool results_on_cpu = false;
  for (const c10::IValue& value : args) {
    results_on_cpu = results_on_cpu ||
        (value.isDevice() && value.toDevice().is_cpu());
  }
  std::vector<std::optional<at::Tensor>> written_into;
  for (size_t i = 0; i < nargs; ++i) {
    written_into.push_back(writes(schema.arguments()[i]) && args[i].isTensor()
                               ? std::optional<at::Tensor>(args[i].toTensor())
                               : std::nullopt);
  }
  op.callBoxed(cpu);

  torch::jit::drop(*stack, nargs);
  size_t written_seen = 0;
  for (size_t r = 0; r < schema.returns().size(); ++r) {
    c10::IValue& value = cpu[r];
    if (writes(schema.returns()[r])) {
      // The r-th written argument, in order, takes the result.
      size_t k = 0;
      for (size_t i = 0; i < nargs; ++i) {
        if (written_into[i] && k++ == written_seen) {
          write_back(*written_into[i], value.toTensor());
          stack->push_back(*written_into[i]);
          break;
        }
      }
      ++written_seen;
      continue;
    }
    stack->push_back(results_on_cpu ? value
                                    : runtime::map_tensors(value, [&](const at::Tensor& t) {
                                        return to_device(t, *device);
                                      }));
  }
}

void refuse_compressed(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op.schema().operator_name(),
      " on infini: compressed sparse layouts (CSR, CSC, BSR, BSC) are not "
      "supported on the infini device; use COO (.to_sparse()) or dense "
      "(strided) tensors (.to_dense()), or run the sparse code on the CPU");
}

}  // namespace

at::Tensor sparse_to_device(const at::Tensor& cpu, c10::Device device) {
  return at::_sparse_coo_tensor_unsafe(
      cpu._indices().to(device), cpu._values().to(device), cpu.sizes(),
      cpu.options().device(device), cpu.is_coalesced());
}

void register_sparse_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Kept for the life of the process: dropping it would deregister.
    static auto library = std::make_unique<torch::Library>(
        torch::Library::IMPL, "aten", c10::DispatchKey::SparsePrivateUse1,
        __FILE__, __LINE__);
    using c10::DispatchKey;
    for (const auto& name : c10::Dispatcher::singleton().getAllOpNames()) {
      const auto op = c10::Dispatcher::singleton().findOp(name);
      if (!op || !op->hasSchema() ||
          !op->hasKernelForDispatchKey(DispatchKey::SparseCPU) ||
          op->hasKernelForDispatchKey(DispatchKey::SparsePrivateUse1) ||
          !(op->hasKernelForDispatchKey(
                DispatchKey::CompositeExplicitAutograd) ||
            op->hasKernelForDispatchKey(
                DispatchKey::CompositeExplicitAutogradNonFunctional))) {
        continue;
      }
      const std::string qualified = c10::toString(name);
      library->impl(qualified.substr(qualified.find("::") + 2).c_str(),
                    torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>());
    }
  });
}

// Dense to sparse: CPU's kernel makes the sparse result, which comes back
// as a sparse infini tensor (the generic kernel lays out strided results
// only); the compressed layouts are refused.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  const auto on_cpu = [] {
    return torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>();
  };
  m.impl("_to_sparse", on_cpu());
  m.impl("_to_sparse.sparse_dim", on_cpu());
  const auto refused = [] {
    return torch::CppFunction::makeFromBoxedFunction<&refuse_compressed>();
  };
  for (const char* name :
       {"_to_sparse_csr", "_to_sparse_csc", "_to_sparse_bsr", "_to_sparse_bsc"}) {
    m.impl(name, refused());
  }
}

// The device-generic parts: structure, not values, so no CPU run.
TORCH_LIBRARY_IMPL(aten, SparsePrivateUse1, m) {
  m.impl("_sparse_coo_tensor_with_dims_and_tensors",
         TORCH_FN(at::native::new_with_dims_and_tensor_sparse_symint));
  m.impl("_sparse_coo_tensor_with_dims",
         TORCH_FN(at::native::new_with_dims_sparse));
  m.impl("empty.memory_format", TORCH_FN(at::native::empty_sparse_symint));
  m.impl("_indices", TORCH_FN(at::native::_indices_sparse));
  m.impl("_values", TORCH_FN(at::native::_values_sparse));
  m.impl("indices", TORCH_FN(at::native::indices_sparse));
  m.impl("values", TORCH_FN(at::native::values_sparse));
  m.impl("_nnz", TORCH_FN(at::native::_nnz_sparse));
  m.impl("sparse_dim", TORCH_FN(at::native::sparse_dim_sparse));
  m.impl("dense_dim", TORCH_FN(at::native::dense_dim_sparse));
  m.impl("is_coalesced", TORCH_FN(at::native::is_coalesced_sparse));
  m.impl("_coalesced_", TORCH_FN(at::native::_coalesced_sparse_));
  m.impl("sparse_resize_", TORCH_FN(at::native::sparse_resize_));
  m.impl("sparse_resize_and_clear_",
         TORCH_FN(at::native::sparse_resize_and_clear_));
}

// Everything else on a sparse infini tensor (or a dense one beside it).
TORCH_LIBRARY_IMPL(_, SparsePrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&run_on_cpu>());
}

// Compressed sparse tensors (CSR, CSC, ...) on infini: every operator says
// so, naming itself.
TORCH_LIBRARY_IMPL(_, SparseCsrPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_compressed>());
}

}  // namespace torch_infini::ops
