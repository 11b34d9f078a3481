// Stream-related ATen operators on infini tensors.

#include <ATen/core/Tensor.h>
#include <torch/library.h>

#include "core/InfiniAllocator.h"

namespace torch_infini::ops {
namespace {

// Tensor.record_stream(s): the tensor's memory is not reused before the work
// queued on `s` so far has finished.
void record_stream(at::Tensor& self, c10::Stream stream) {
  allocator::record_stream(self.storage().data_ptr(), stream);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("record_stream", TORCH_FN(record_stream));
}

}  // namespace torch_infini::ops
