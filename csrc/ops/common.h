#pragma once

// Helpers shared by the ATen kernels of the infini device: describing tensors
// to the runtime, the stream to run on, and failing with messages that name
// the operator and the provider.

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <string>

#include "runtime/kernels.h"
#include "runtime/runtime.h"

namespace torch_infini::ops {

// "aten::add.Tensor" ("aten::trace" without an overload name), as
// c10::toString formats it, without its ostringstream (a locale, a heap
// allocation: about 1,500 instructions), for names built per call.
inline std::string full_name(const c10::OperatorName& op) {
  return op.overload_name.empty() ? op.name
                                  : op.name + "." + op.overload_name;
}

// The tensor as the runtime sees it: data pointer (storage offset applied),
// sizes, strides, dtype.
runtime::TensorArg arg_of(const at::Tensor& t);

// `t` viewed with `sizes` (trailing-aligned broadcast: stride 0 along
// broadcast dimensions), without creating an at::Tensor.
runtime::TensorArg broadcast_arg(const at::Tensor& t, at::IntArrayRef sizes);

// A CPU tensor over the memory of infini tensor `t` (same sizes, strides,
// dtype, conjugate and negative bits), keeping `t`'s storage alive. Only for
// providers whose device memory the host can address; the caller orders its
// use against the stream's work.
at::Tensor host_alias(const at::Tensor& t);

// A new infini tensor on the current device, for kernels whose device guard
// has set it: the factory's allocation without its trip through the
// dispatcher and its own resolution of the device.
at::Tensor empty_strided_on_current_device(at::IntArrayRef size,
                                           at::IntArrayRef stride,
                                           at::ScalarType dtype);
// The same, contiguous; as CPU's kernels make their outputs, not filled
// under deterministic algorithms (at::empty is).
at::Tensor empty_on_current_device(at::IntArrayRef size, at::ScalarType dtype);

// The provider handle of the current stream of `device`.
runtime::StreamHandle current_native_stream(c10::DeviceIndex device);

// "host" or "infini/<backend>", for messages.
std::string provider_label();

// Raises NotImplementedError "<op> on infini (<provider>): <reason>" when
// `reason` is non-empty.
void check_supported(const char* op, const std::string& reason);

// Raises unless every tensor is an infini tensor on the same device; names
// the operator and the offending devices.
void check_same_infini_device(const char* op, const at::Tensor& a,
                              const at::Tensor& b);

}  // namespace torch_infini::ops
