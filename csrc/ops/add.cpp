// aten::add.Tensor, add_.Tensor and add.out on the infini device.
//
// PyTorch semantics are settled here, before any provider sees the call:
// devices and dtypes are checked (no type promotion), the output's shape and
// strides come from TensorIterator exactly as on the CPU (so a transposed
// input gives CPU's output strides, and out= and in-place follow CPU's
// broadcast and overlap rules), and the provider gets each operand already
// broadcast to the output's shape.

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>

#include "core/InfiniFunctions.h"
#include "ops/aten/aten_kernel.h"
#include "ops/common.h"
#include "ops/scalar_cache.h"

namespace torch_infini::ops {
namespace {

constexpr const char* kAddOp = "aten::add.Tensor";

bool is_cpu_scalar(const at::Tensor& t) {
  return t.device().is_cpu() && t.dim() == 0;
}

// A CPU 0-dim operand (a Python number, or torch.tensor(2.)) becomes a cached
// one-element device tensor of the other operand's dtype.
at::Tensor to_device_operand(const at::Tensor& t, const at::Tensor& peer) {
  if (t.device().type() == kInfini || peer.device().type() != kInfini ||
      !is_cpu_scalar(t)) {
    return t;
  }
  return device_scalar(t.item(), peer.scalar_type(), peer.device());
}

// A dtype's category in PyTorch's type promotion: a 0-dim operand (a Python
// number, torch.tensor(2.)) changes the result's dtype only where its
// category is higher than the other operand's.
int promotion_category(c10::ScalarType dtype) {
  if (dtype == c10::ScalarType::Bool) {
    return 0;
  }
  if (c10::isIntegralType(dtype, /*includeBool=*/false)) {
    return 1;
  }
  return c10::isComplexType(dtype) ? 3 : 2;
}

// Whether the call is not one for add's own kernels, which take operands of
// one numeric dtype (runtime::numeric_dtypes) and compute in it: CPU would
// compute in another dtype (two dtypes; a 0-dim operand of a higher
// category, such as a float or complex scalar with an integer or float
// tensor, or an integer with a bool tensor), or the dtype is complex, bool,
// or one CPU's add has no kernel for (uint16, float8...). Such calls go to
// the op-family kernel, which promotes as CPU does, and whose provider
// raises CPU's own error for a dtype CPU lacks, or refuses the call naming
// the dtype.
bool needs_promotion(const at::Tensor& self, const at::Tensor& other) {
  static const auto numeric = runtime::numeric_dtypes(/*with_bool=*/false);
  const auto generic = [](const at::Tensor& t) {
    return std::find(numeric.begin(), numeric.end(), t.scalar_type()) ==
        numeric.end();
  };
  const bool self_scalar = is_cpu_scalar(self);
  const bool other_scalar = is_cpu_scalar(other);
  if ((!self_scalar && generic(self)) || (!other_scalar && generic(other))) {
    return true;
  }
  if (self_scalar != other_scalar) {
    const at::Tensor& scalar = is_cpu_scalar(self) ? self : other;
    const at::Tensor& tensor = is_cpu_scalar(self) ? other : self;
    return promotion_category(scalar.scalar_type()) >
        promotion_category(tensor.scalar_type());
  }
  return self.scalar_type() != other.scalar_type();
}

// Output shape, strides, resizing and overlap checks exactly as on the CPU.
void build_output(const at::Tensor& self, const at::Tensor& other,
                  at::Tensor& out, bool has_out) {
  auto iter = at::TensorIteratorConfig()
                  .set_check_mem_overlap(true)
                  .add_output(out)
                  .add_const_input(self)
                  .add_const_input(other)
                  .allow_cpu_scalars(false)
                  .promote_inputs_to_common_dtype(false)
                  .check_all_same_dtype(true)
                  .build();
  if (!has_out) {
    out = iter.output();
  }
}

// The call as the op-family kernel runs it (see needs_promotion).
at::Tensor promoted(const char* name, const char* overload,
                    torch::jit::Stack stack) {
  const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow(name, overload);
  run_family_kernel(op, &stack);
  return stack.back().toTensor();
}

at::Tensor& add_into(const at::Tensor& self_in, const at::Tensor& other_in,
                     const at::Scalar& alpha, at::Tensor& out,
                     bool has_out) {
  const at::Tensor self = to_device_operand(self_in, other_in);
  const at::Tensor other = to_device_operand(other_in, self);
  TORCH_CHECK(self.device().type() == kInfini &&
                  other.device().type() == kInfini,
              kAddOp, ": expected both operands on infini, got ",
              self.device(), " and ", other.device(),
              "; move them with .to('infini') first");
  check_same_infini_device(kAddOp, self, other);
  if (has_out) {
    TORCH_CHECK(out.device() == self.device(), kAddOp,
                ": expected all tensors to be on the same device, but out= is on ",
                out.device(), " and the operands on ",
                self.device());
  }
  const bool integral = c10::isIntegralType(self.scalar_type(), true);
  TORCH_CHECK(!(integral && alpha.isFloatingPoint()),
              "For integral input tensors, argument alpha must not be a "
              "floating point number.");

  c10::DeviceGuard guard(self.device());
  if (!has_out && self.sizes() == other.sizes() && self.is_contiguous() &&
      other.is_contiguous()) {
    // The common case, without building a TensorIterator: CPU gives a
    // contiguous output for contiguous operands of one shape.
    out = empty_on_current_device(self.sizes(), self.scalar_type());
  } else {
    build_output(self, other, out, has_out);
  }
  if (out.numel() == 0) {
    return out;
  }
  runtime::AddArgs args{broadcast_arg(self, out.sizes()),
                        broadcast_arg(other, out.sizes()), arg_of(out),
                        alpha};
  auto& kernels = runtime::kernels();
  const std::string unsupported = kernels.add_unsupported(args);
  if (!unsupported.empty()) {
    // The provider's add cannot run this call. Its other kernels may, as
    // aten::add.out into the output chosen above (the Infini stack's
    // ATen-backed Add, where the native one would round otherwise than
    // ATen; the host runtime's CPU add for the dtypes its add kernel does
    // not take); else the opt-in CPU fallback may; otherwise say why not.
    static const c10::OperatorHandle add_out_op =
        c10::Dispatcher::singleton().findSchemaOrThrow("aten::add", "out");
    torch::jit::Stack stack{self, other, alpha, out};
    const runtime::AtenCall call{add_out_op, stack};
    if (kernels.has_kernel(add_out_op) &&
        !kernels.aten_unsupported(call).refused()) {
      run_family_kernel(add_out_op, &stack);
      return out;
    }
    serve_unserved(add_out_op, &stack, {false, [&](const std::string&) {
      check_supported(kAddOp, unsupported);
    }});
    return out;
  }
  kernels.add(out.device().index(),
              current_native_stream(out.device().index()), args);
  return out;
}

at::Tensor add(const at::Tensor& self, const at::Tensor& other,
               const at::Scalar& alpha) {
  if (needs_promotion(self, other)) {
    return promoted("aten::add", "Tensor", {self, other, alpha});
  }
  at::Tensor out;
  return add_into(self, other, alpha, out, /*has_out=*/false);
}

at::Tensor& add_(at::Tensor& self, const at::Tensor& other,
                 const at::Scalar& alpha) {
  if (needs_promotion(self, other)) {
    promoted("aten::add_", "Tensor", {self, other, alpha});
    return self;
  }
  return add_into(self, other, alpha, self, /*has_out=*/true);
}

at::Tensor& add_out(const at::Tensor& self, const at::Tensor& other,
                    const at::Scalar& alpha, at::Tensor& out) {
  if (needs_promotion(self, other) ||
      out.scalar_type() != (is_cpu_scalar(self) ? other : self).scalar_type()) {
    promoted("aten::add", "out", {self, other, alpha, out});
    return out;
  }
  return add_into(self, other, alpha, out, /*has_out=*/true);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(add));
  m.impl("add_.Tensor", TORCH_FN(add_));
  m.impl("add.out", TORCH_FN(add_out));
}

}  // namespace torch_infini::ops
