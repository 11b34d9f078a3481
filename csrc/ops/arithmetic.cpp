// aten::add, sub and mul (.Tensor, _.Tensor and .out) on the infini device:
// one table entry each (kEntries), served by the provider's element-wise
// kernel (runtime::OpKernels::binary) without the generic kernel's boxed
// call, which costs a small call more than its compute.
//
// PyTorch semantics are settled here, before any provider sees the call:
// the output's shape and strides come from TensorIterator exactly as on the
// CPU (so a transposed input gives CPU's output strides, and out= and
// in-place follow CPU's broadcast and overlap rules), and the provider gets
// each operand already broadcast to the output's shape, in one dtype. A
// call that is not of that kind (type promotion, operands on two devices, a
// dtype of no numeric kernel), or of an op the provider has no kernel for,
// goes to the generic kernel of the overload called, as any other operator:
// its result, and its error, are CPU's.

#include <ATen/TensorIterator.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>

#include "core/InfiniFunctions.h"
#include "ops/aten/aten_kernel.h"
#include "ops/aten/backend_policy.h"
#include "ops/common.h"
#include "ops/scalar_cache.h"

namespace torch_infini::ops {
namespace {

using runtime::BinaryOp;

// An op's names and whether it takes alpha.
struct Entry {
  const char* name;  // "aten::add"
  const char* call;  // the functional overload, as errors name it
  bool has_alpha;
};

constexpr Entry entry_of(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return {"aten::add", "aten::add.Tensor", true};
    case BinaryOp::kSub:
      return {"aten::sub", "aten::sub.Tensor", true};
    case BinaryOp::kMul:
      return {"aten::mul", "aten::mul.Tensor", false};
  }
  return {"", "", false};
}

// The three overloads of an op, found once.
enum class Form { kFunctional, kInPlace, kOut };

template <BinaryOp kOp, Form kForm>
const c10::OperatorHandle& overload() {
  static const c10::OperatorHandle handle = [] {
    const std::string name = entry_of(kOp).name;
    return kForm == Form::kInPlace
        ? c10::Dispatcher::singleton().findSchemaOrThrow(
              (name + "_").c_str(), "Tensor")
        : c10::Dispatcher::singleton().findSchemaOrThrow(
              name.c_str(), kForm == Form::kOut ? "out" : "Tensor");
  }();
  return handle;
}

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

// Whether the call is not one for the element-wise kernels, which take
// operands of one numeric dtype (runtime::numeric_dtypes) on one infini
// device and compute in that dtype: CPU would compute in another dtype (two
// dtypes; a 0-dim operand of a higher category, such as a float or complex
// scalar with an integer or float tensor, or an integer with a bool
// tensor), the dtype is complex, bool, or one CPU has no kernel for
// (uint16, float8...), a bool operand meets sub (which CPU refuses), a
// number multiplies a float16 or bfloat16 tensor, an operand or out= is on
// another device, or the provider has no kernel for the op (or enforces a
// backend's refusals). Such calls go to the generic kernel, which promotes
// as CPU does and raises CPU's own error for what CPU refuses.
bool for_generic_kernel(BinaryOp op, const at::Tensor& self,
                        const at::Tensor& other, const at::Tensor* out) {
  static const auto numeric = runtime::numeric_dtypes(/*with_bool=*/false);
  const auto generic = [](const at::Tensor& t) {
    return std::find(numeric.begin(), numeric.end(), t.scalar_type()) ==
        numeric.end();
  };
  const bool self_scalar = is_cpu_scalar(self);
  const bool other_scalar = is_cpu_scalar(other);
  const at::Tensor& tensor = self_scalar ? other : self;
  if (tensor.device().type() != kInfini ||
      (!self_scalar && !other_scalar && self.device() != other.device()) ||
      (out != nullptr && (out->device() != tensor.device() ||
                          out->scalar_type() != tensor.scalar_type()))) {
    return true;
  }
  if ((!self_scalar && generic(self)) || (!other_scalar && generic(other))) {
    return true;
  }
  if (op == BinaryOp::kSub && (self.scalar_type() == c10::ScalarType::Bool ||
                               other.scalar_type() == c10::ScalarType::Bool)) {
    return true;
  }
  if (!runtime::kernels().has_binary(op) ||
      (op != BinaryOp::kAdd && backend_policy::active())) {
    // No kernel of the provider's own; or the host runtime plays an
    // InfiniOps backend (TORCH_INFINI_ENFORCE_BACKEND), whose refusals the
    // generic kernel applies: only add is the device's own there, as on
    // the stack.
    return true;
  }
  if (self_scalar != other_scalar) {
    if (op == BinaryOp::kMul &&
        c10::isReducedFloatingType(tensor.scalar_type())) {
      // CPU's mul multiplies a float16 or bfloat16 tensor by a number in
      // float, unrounded; the kernels here would round it to the tensor's
      // dtype first (add and sub round it as CPU does).
      return true;
    }
    const at::Tensor& scalar = self_scalar ? self : other;
    return promotion_category(scalar.scalar_type()) >
        promotion_category(tensor.scalar_type());
  }
  return self.scalar_type() != other.scalar_type();
}

// The call as the generic kernel runs it (see for_generic_kernel).
void run_generic(const c10::OperatorHandle& op, torch::jit::Stack stack) {
  run_family_kernel(op, &stack);
}

// The arguments of an overload of the op: alpha only where it takes one.
template <BinaryOp kOp>
torch::jit::Stack stack_of(const at::Tensor& self, const at::Tensor& other,
                           const at::Scalar& alpha) {
  if constexpr (entry_of(kOp).has_alpha) {
    return {self, other, alpha};
  } else {
    return {self, other};
  }
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

template <BinaryOp kOp>
at::Tensor& into(const at::Tensor& self_in, const at::Tensor& other_in,
                 const at::Scalar& alpha, at::Tensor& out, bool has_out) {
  const at::Tensor self = to_device_operand(self_in, other_in);
  const at::Tensor other = to_device_operand(other_in, self);
  if constexpr (entry_of(kOp).has_alpha) {
    const bool integral = c10::isIntegralType(self.scalar_type(), true);
    TORCH_CHECK(!(integral && alpha.isFloatingPoint()),
                "For integral input tensors, argument alpha must not be a "
                "floating point number.");
  }

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
  runtime::BinaryArgs args{broadcast_arg(self, out.sizes()),
                           broadcast_arg(other, out.sizes()), arg_of(out),
                           alpha, kOp};
  auto& kernels = runtime::kernels();
  const std::string unsupported = kernels.binary_unsupported(args);
  if (!unsupported.empty()) {
    // The provider's kernel cannot run this call. Its other kernels may, as
    // the out= overload into the output chosen above (the Infini stack's
    // ATen-backed Add, where the native one would round otherwise than
    // ATen); else the opt-in CPU fallback may; otherwise say why not.
    const c10::OperatorHandle& out_op = overload<kOp, Form::kOut>();
    torch::jit::Stack stack = stack_of<kOp>(self, other, alpha);
    stack.emplace_back(out);
    const runtime::AtenCall call{out_op, stack};
    if (kernels.has_kernel(out_op) &&
        !kernels.aten_unsupported(call).refused()) {
      run_family_kernel(out_op, &stack);
      return out;
    }
    serve_unserved(out_op, &stack, {false, [&](const std::string&) {
      check_supported(entry_of(kOp).call, unsupported);
    }});
    return out;
  }
  kernels.binary(out.device().index(),
                 current_native_stream(out.device().index()), args);
  return out;
}

template <BinaryOp kOp>
at::Tensor functional(const at::Tensor& self, const at::Tensor& other,
                      const at::Scalar& alpha) {
  if (for_generic_kernel(kOp, self, other, nullptr)) {
    torch::jit::Stack stack = stack_of<kOp>(self, other, alpha);
    run_family_kernel(overload<kOp, Form::kFunctional>(), &stack);
    return stack.back().toTensor();
  }
  at::Tensor out;
  return into<kOp>(self, other, alpha, out, /*has_out=*/false);
}

template <BinaryOp kOp>
at::Tensor& in_place(at::Tensor& self, const at::Tensor& other,
                     const at::Scalar& alpha) {
  if (for_generic_kernel(kOp, self, other, &self)) {
    run_generic(overload<kOp, Form::kInPlace>(),
                stack_of<kOp>(self, other, alpha));
    return self;
  }
  return into<kOp>(self, other, alpha, self, /*has_out=*/true);
}

template <BinaryOp kOp>
at::Tensor& out_form(const at::Tensor& self, const at::Tensor& other,
                     const at::Scalar& alpha, at::Tensor& out) {
  if (for_generic_kernel(kOp, self, other, &out)) {
    torch::jit::Stack stack = stack_of<kOp>(self, other, alpha);
    stack.emplace_back(out);
    run_generic(overload<kOp, Form::kOut>(), std::move(stack));
    return out;
  }
  return into<kOp>(self, other, alpha, out, /*has_out=*/true);
}

// The registered signatures: add and sub take alpha, mul does not.
at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  return functional<BinaryOp::kMul>(self, other, 1);
}

at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  return in_place<BinaryOp::kMul>(self, other, 1);
}

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other,
                    at::Tensor& out) {
  return out_form<BinaryOp::kMul>(self, other, 1, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", TORCH_FN(functional<BinaryOp::kAdd>));
  m.impl("add_.Tensor", TORCH_FN(in_place<BinaryOp::kAdd>));
  m.impl("add.out", TORCH_FN(out_form<BinaryOp::kAdd>));
  m.impl("sub.Tensor", TORCH_FN(functional<BinaryOp::kSub>));
  m.impl("sub_.Tensor", TORCH_FN(in_place<BinaryOp::kSub>));
  m.impl("sub.out", TORCH_FN(out_form<BinaryOp::kSub>));
  m.impl("mul.Tensor", TORCH_FN(mul));
  m.impl("mul_.Tensor", TORCH_FN(mul_));
  m.impl("mul.out", TORCH_FN(mul_out));
}

}  // namespace torch_infini::ops
