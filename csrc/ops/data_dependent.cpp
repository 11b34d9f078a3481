// Operators whose result depends on the values: aten::masked_select (its
// length) and aten::equal (a bool). As on CUDA they wait for the current
// stream to learn that from the device, then run like any other call.

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/all.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/sum.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "core/InfiniFunctions.h"
#include "ops/common.h"
#include "ops/fallback.h"
#include "runtime/aten_ops.h"

namespace torch_infini::ops {
namespace {

constexpr const char* kMaskedSelect = "aten::masked_select";

void check_infini_pair(const char* op, const at::Tensor& a,
                       const at::Tensor& b) {
  TORCH_CHECK(a.device().type() == kInfini && b.device().type() == kInfini,
              op, ": expected both tensors on infini, got ", a.device(),
              " and ", b.device(), "; move them with .to('infini') first");
  check_same_infini_device(op, a, b);
}

at::Tensor masked_select(const at::Tensor& self, const at::Tensor& mask) {
  check_infini_pair(kMaskedSelect, self, mask);
  TORCH_CHECK(mask.scalar_type() == at::kBool,
              "masked_select: expected BoolTensor for mask");
  const auto* family = runtime::aten_op_family(kMaskedSelect);
  const auto& dtypes = family->dtypes;
  TORCH_CHECK_NOT_IMPLEMENTED(
      std::find(dtypes.begin(), dtypes.end(), self.scalar_type()) !=
          dtypes.end(),
      kMaskedSelect, " on infini (", provider_label(), "): dtype ",
      runtime::dtype_list({self.scalar_type()}), " is not supported");
  c10::DeviceGuard guard(self.device());
  // Broadcasting errors as CPU raises them, then the length (a sync).
  const auto expanded = at::expand_outplace(self, mask);
  const int64_t length = std::get<1>(expanded)->sum().item<int64_t>();
  at::Tensor out = at::empty({length}, self.options());
  if (length == 0) {
    return out;
  }
  static const auto out_op = c10::Dispatcher::singleton().findSchemaOrThrow(
      "aten::masked_select", "out");
  runtime::AtenCall call{out_op, {self, mask, out}, {}, family};
  auto& kernels = runtime::kernels();
  const std::string unsupported = kernels.aten_unsupported(call);
  if (!unsupported.empty()) {
    static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
        "aten::masked_select", "");
    torch::jit::Stack stack{self, mask};
    if (try_cpu_fallback(op, &stack)) {
      return stack.back().toTensor();
    }
    check_supported(kMaskedSelect, unsupported);
  }
  kernels.aten(self.device().index(),
               current_native_stream(self.device().index()), std::move(call));
  return out;
}

// CPU's semantics: different sizes are unequal, dtypes may differ (values
// are compared after promotion), NaN is unequal to itself.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  check_infini_pair("aten::equal", self, other);
  if (self.sizes() != other.sizes()) {
    return false;
  }
  if (self.numel() == 0) {
    return true;
  }
  c10::DeviceGuard guard(self.device());
  return at::eq(self, other).all().item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("masked_select", TORCH_FN(masked_select));
  m.impl("equal", TORCH_FN(equal));
}

}  // namespace torch_infini::ops
