// fill_ and zero_ on the infini device: torch.zeros/ones/full and
// nn.Module buffers reach these.

#include <ATen/Dispatch.h>
#include <ATen/Dispatch_v2.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <cmath>

#include "ops/aten/aten_kernel.h"
#include "ops/aten/backend_policy.h"
#include "ops/common.h"

namespace torch_infini::ops {
namespace {

// Without a fill kernel of the provider's own: fill.Scalar_out into self
// where the provider's other kernels serve it (InfiniOps' Fill: ATen-backed
// on InfiniRT's CPU backend, native on NVIDIA, MetaX, Iluvatar and Moore),
// queued like any kernel, where a host-prepared buffer copied from pageable
// memory would wait for the stream on every torch.zeros. Its input is read
// for its shape only: a one-element scratch tensor expanded to self's
// shape, since an output may not be the memory of an input the kernel
// reads. Fill's value is a double: an integer value is passed only where
// one holds it exactly (to 2^53), and to an integer tensor as the value it
// converts to in self's dtype, what CPU's fill_ writes (it raised above
// where that overflows).
bool fill_by_operator(at::Tensor& self, const at::Scalar& value) {
  static const c10::OperatorHandle fill_out =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::fill",
                                                     "Scalar_out");
  // Every integer below 2^53 in magnitude is a double, and converts to one
  // below it; at and beyond it, not every one is.
  constexpr double kExactInDouble = 9007199254740992.0;  // 2^53
  // Under TORCH_INFINI_ENFORCE_BACKEND a fill is the device's own work on
  // every backend (ops/aten/backend_policy.h), not an operator the enforced
  // backend may lack: the host buffer serves it.
  if (value.isComplex() ||
      (value.isIntegral(/*includeBool=*/false) &&
       std::abs(value.toDouble()) >= kExactInDouble) ||
      backend_policy::active() || !runtime::kernels().has_kernel(fill_out)) {
    return false;
  }
  c10::Scalar as_double = value;
  if (c10::isIntegralType(self.scalar_type(), /*includeBool=*/true)) {
    int64_t converted = 0;  // -3 as uint8 is 253, as CPU writes it
    AT_DISPATCH_V2(self.scalar_type(), "fill_",
                   AT_WRAP([&] {
                     converted = static_cast<int64_t>(value.to<scalar_t>());
                   }),
                   AT_EXPAND(AT_INTEGRAL_TYPES), at::kBool,
                   AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES));
    if (std::abs(static_cast<double>(converted)) >= kExactInDouble) {
      return false;
    }
    as_double = static_cast<double>(converted);
  }
  // The binding refuses bool tensors: a bool's memory is one byte, 0 or 1,
  // so its uint8 view filled with 0 or 1 holds the same bools (the causal
  // mask of every math attention is a torch.ones of bools).
  const at::Tensor target =
      self.scalar_type() == at::kBool ? self.view(at::kByte) : self;
  // Not at::empty: under deterministic algorithms new memory is filled,
  // which would come back here.
  const at::Tensor shape =
      empty_strided_on_current_device({}, {}, target.scalar_type())
          .expand(target.sizes());
  torch::jit::Stack stack{shape, as_double, target};
  if (runtime::kernels()
          .aten_unsupported(runtime::AtenCall{fill_out, stack})
          .refused()) {
    return false;
  }
  run_family_kernel(fill_out, &stack);
  return true;
}

at::Tensor& fill_scalar(at::Tensor& self, const at::Scalar& value) {
  // Checked now, on the calling thread, with the conversion the CPU kernel
  // uses (a value that overflows the dtype raises), not later on a stream.
  AT_DISPATCH_V2(self.scalar_type(), "fill_",
                 AT_WRAP([&] { (void)value.to<scalar_t>(); }),
                 AT_EXPAND(AT_ALL_TYPES_AND_COMPLEX), at::kHalf, at::kBFloat16,
                 at::kBool, at::kComplexHalf, AT_EXPAND(AT_BAREBONES_UNSIGNED_TYPES),
                 AT_EXPAND(AT_FLOAT8_TYPES));
  if (self.numel() == 0) {
    return self;
  }
  c10::DeviceGuard guard(self.device());
  const runtime::FillArgs args{arg_of(self), value};
  auto& kernels = runtime::kernels();
  if (kernels.fill_unsupported(args).empty()) {
    kernels.fill(self.device().index(),
                 current_native_stream(self.device().index()), args);
    return self;
  }
  if (fill_by_operator(self, value)) {
    return self;
  }
  // Else copy a host-prepared buffer (data movement, ordered on the current
  // stream like any copy to the device; from pageable memory it waits for
  // the stream).
  at::Tensor host =
      at::empty(self.sizes(), self.options().device(at::kCPU).pinned_memory(false));
  host.fill_(value);
  self.copy_(host);
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0,
              "fill_ only supports 0-dimension value tensor but got tensor "
              "with ", value.dim(), " dimensions.");
  return fill_scalar(self, value.item());
}

at::Tensor& zero_(at::Tensor& self) {
  return fill_scalar(self, 0);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("fill_.Scalar", TORCH_FN(fill_scalar));
  m.impl("fill_.Tensor", TORCH_FN(fill_tensor));
  m.impl("zero_", TORCH_FN(zero_));
}

}  // namespace torch_infini::ops
