// aten::_has_compatible_shallow_copy_type for infini tensors.
//
// `param.data = other` and nn.Module._apply (behind Module.to("infini"))
// ask this whether one tensor's metadata and storage can be swapped into
// another object. TensorImpl's built-in answer lists only the in-tree dense
// backends (CPU, CUDA, ...), so for PrivateUse1 it says no and Module.to()
// replaces every Parameter with a new object: weights tied across modules
// come apart, and an optimizer built before .to() holds stale parameters.
// PyTorch leaves the answer to the backend (see c10/core/TensorImpl.h); ours
// is the one CUDA gets: yes between dense strided tensors on the CPU or infini.

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "core/InfiniFunctions.h"

namespace torch_infini::ops {
namespace {

bool dense_cpu_or_infini(const at::Tensor& t) {
  return t.layout() == at::kStrided && !t.is_quantized() && !t.is_nested() &&
      (t.device().is_cpu() || t.device().type() == kInfini);
}

bool has_compatible_shallow_copy_type(const at::Tensor& self,
                                      const at::Tensor& from) {
  if (self.key_set() == from.key_set()) {
    return true;
  }
  return dense_cpu_or_infini(self) && dense_cpu_or_infini(from);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type",
         TORCH_FN(has_compatible_shallow_copy_type));
}

}  // namespace torch_infini::ops
