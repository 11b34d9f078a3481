#pragma once

// What a generic ATen call is, as both layers see it: the generic kernel
// (ops/aten/aten_kernel.cpp), which settles PyTorch's semantics for it, and
// the provider's strategy for running it (runtime/generic_call.h): how a
// registered overload is run, where a call runs, the outputs' metadata, and
// a walk over a call's tensor arguments.

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/aten_ops.h"
#include "runtime/ivalue_tensors.h"
#include "runtime/runtime.h"

namespace torch_infini::runtime {

// How one registered overload is run.
struct Plan {
  std::string name;  // "aten::mul.out"
  // The op family the Infini provider maps onto InfiniOps, if any.
  const AtenOpFamily* family = nullptr;
  // The provider maps it (or its out= twin) onto its library
  // (OpKernels::maps): planned and queued like a family's overload.
  bool mapped = false;
  std::vector<size_t> written;  // arguments it writes (self_, out=)
  // Tensor?[] arguments: the indices of index, index_put and their kin,
  // which may be CPU tensors (moved to the device, as CUDA moves them).
  std::vector<size_t> index_lists;
  // Plain Tensor arguments that CUDA also takes from the CPU (index_fill's
  // index), moved to the device like index_lists: see cpu_accepted_index.
  std::vector<size_t> cpu_indices;
  std::vector<bool> written_out;  // per written argument: kwarg-only out=
  // Every return is a written argument (in-place and out= overloads).
  bool returns_only_written = false;
  // For a functional overload: its out= twin, which the provider runs into
  // the outputs allocated here; without one, the functional overload runs
  // and its results are copied into them.
  std::optional<c10::OperatorHandle> out_twin;
  // Set once a run showed the twin is not equivalent (runtime::TwinOf):
  // the functional overload runs from then on.
  std::shared_ptr<std::atomic<bool>> twin_refuted =
      std::make_shared<std::atomic<bool>>(false);
  // Non-empty: every call synchronizes and runs directly (ops/aten/aten_registry.h).
  std::string sync_reason;
  // CUDA checks its values in the kernel: its errors come at the next
  // synchronization for every call (ops/aten/aten_registry.h).
  bool checks_on_device = false;
  // CUDA's kernel makes the host wait too (ops/sync_debug.h reports it).
  bool synchronizes_on_cuda = false;
  // Its queued kernels get contiguous copies of inputs that are not
  // contiguous in their suggested format (ops/aten/aten_registry.h).
  bool contiguous_inputs = false;
  // Elementwise results take their inputs' layout (the meta path's fix-up).
  bool elementwise = false;
  // Tagged pointwise, it or an overload of its operator (PyTorch tags
  // where.self but not where.self_out, masked_fill but not masked_fill_).
  bool pointwise = false;
};

// Where one call runs: its device, that device's current stream and the
// provider's kernels, resolved once when the kernel is entered (under the
// call's device guard) and handed to every step, so that no step asks for
// them again (each ask re-validates the device index, or the provider).
struct CallTarget {
  c10::Device device;
  c10::Stream stream;            // the current stream of `device`
  StreamHandle native;  // the provider's handle of `stream`
  OpKernels& kernels;    // the provider's kernels (runtime::kernels())
};

// The metadata of one output tensor: a functional result, or an out= or
// in-place argument after CPU's resizing.
struct Layout {
  bool defined = false;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// One written argument (a tensor list written in place has no layouts), or
// one new result (a tensor, or a tensor list).
struct ResultLayout {
  bool is_list = false;
  std::vector<Layout> tensors;
};
// A call's outputs: its written arguments, in order, then its new results
// (the returns that are not written arguments), in order.
using Layouts = std::vector<ResultLayout>;

// What the CPU copies of a call's device tensors hold when CPU lays the
// call out on them (GenericCall::cpu_layouts).
enum class CopiedValues : uint8_t {
  kDevice,   // the device's values, read in stream order (it synchronizes)
  kZeros,    // zero bytes: CPU's checks of everything but the values
  kNonzero,  // 0x01 bytes, nonzero in every dtype (a divisor, a norm)
};

// Whether the schema's return `i` is one of the written arguments.
inline bool returns_written(const c10::FunctionSchema& schema, size_t i) {
  const auto* alias = schema.returns()[i].alias_info();
  return alias != nullptr && alias->isWrite();
}

// The layout of `t` (undefined: no layout).
inline Layout layout_of(const at::Tensor& t) {
  Layout layout;
  layout.defined = t.defined();
  if (layout.defined) {
    layout.sizes = t.sizes().vec();
    if (t.layout() == c10::kStrided) {  // a sparse result has none (never cached)
      layout.strides = t.strides().vec();
    }
    layout.dtype = t.scalar_type();
  }
  return layout;
}

// The layouts of a new result (a tensor, a tensor list, or None).
inline ResultLayout result_layout(const c10::IValue& value) {
  ResultLayout r;
  if (value.isTensorList()) {
    r.is_list = true;
    for (const at::Tensor& t : value.toTensorList()) {
      r.tensors.push_back(layout_of(t));
    }
  } else {
    r.tensors.push_back(layout_of(value.isTensor() ? value.toTensor()
                                                   : at::Tensor()));
  }
  return r;
}

// `out` given `sizes` and `strides`, the way CPU resizes an out= argument.
// Strides that need more memory than the sizes alone (a CPU kernel that
// pads its output's leading dimension) grow the storage first.
inline void match_layout(at::Tensor& out, at::IntArrayRef sizes,
                         at::IntArrayRef strides) {
  if (out.sizes() != sizes) {
    out.resize_(sizes);
  }
  if (out.strides() != strides) {
    int64_t extent = 1;  // elements from the first to the last, plus one
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (sizes[i] == 0) {
        extent = 0;
        break;
      }
      extent += (sizes[i] - 1) * strides[i];
    }
    const int64_t available =
        static_cast<int64_t>(out.storage().nbytes() / out.element_size()) -
        out.storage_offset();
    if (extent > available) {
      out.resize_({extent});
    }
    out.as_strided_(sizes, strides);
  }
}

}  // namespace torch_infini::runtime
