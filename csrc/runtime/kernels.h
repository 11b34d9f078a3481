#pragma once

// The narrow kernel interface between ops/ ("what PyTorch asked") and the
// providers ("what the device can do"): one argument record and one entry per
// op family, plus the declared support matrix of each op.

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/stack.h>
#include <c10/core/Scalar.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <c10/util/SmallVector.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runtime/aten_ops.h"
#include "runtime/runtime.h"

namespace torch_infini::runtime {

class GenericCall;

// One tensor as a kernel sees it: device memory plus layout, by value so a
// queued kernel can outlive the at::Tensor it came from (the allocator keeps
// the memory alive until the stream's work on it is done).
struct TensorArg {
  void* data = nullptr;
  c10::SmallVector<int64_t, 6> sizes;
  c10::SmallVector<int64_t, 6> strides;
  c10::ScalarType dtype = c10::ScalarType::Undefined;
};

// The element-wise arithmetic the providers may run as a table entry of
// their own (ops/arithmetic.cpp), without the generic kernel's boxed call.
enum class BinaryOp : uint8_t {
  kAdd,  // out = self + alpha * other
  kSub,  // out = self - alpha * other
  kMul,  // out = self * other (alpha is 1)
};

// A BinaryOp's call, in one dtype: `self` and `other` are already broadcast
// to out's shape (stride 0 along broadcast dimensions).
struct BinaryArgs {
  TensorArg self;
  TensorArg other;
  TensorArg out;
  c10::Scalar alpha = 1;  // exact for int64, unlike a double
  BinaryOp op = BinaryOp::kAdd;
};

// The ops along one dimension the providers may run as a table entry of
// their own (ops/rowwise.cpp).
enum class RowwiseOp : uint8_t {
  kSoftmax,     // aten::_softmax
  kLogSoftmax,  // aten::_log_softmax
};

// A RowwiseOp's call: `out` is contiguous, of self's sizes and dtype;
// `dim` is wrapped (0 <= dim < max(1, self's rank)).
struct RowwiseArgs {
  TensorArg self;
  TensorArg out;
  int64_t dim = 0;
  RowwiseOp op = RowwiseOp::kSoftmax;
};

// dst = src, element by element, any strides, converting dtype. Both live on
// the same device.
struct CopyArgs {
  TensorArg src;
  TensorArg dst;
};

// Every element of `self` (any strides) = value.
struct FillArgs {
  TensorArg self;
  c10::Scalar value;
};

// The functional overload an out= twin stands in for. A twin is equivalent
// to it only if it writes the outputs it is given in place: some CPU out=
// kernels instead use their output as scratch of another shape and reduce
// from what they left there (binary_cross_entropy.out with a 0-dim `out`
// reads back its first loss element), which is right for the output the
// functional overload passes them and wrong for the final one. A provider
// that finds a twin has moved or resized an output runs `functional`
// instead, for that call, and sets `refuted`: the ops layer then queues the
// functional overload for every later call of the operator.
struct TwinOf {
  c10::OperatorHandle functional;
  std::shared_ptr<std::atomic<bool>> refuted;
};

// One call of an ATen operator on device tensors, ready to run (the generic
// entry serving the families of runtime/aten_ops.h). The ops layer has
// checked it and allocated and shaped its outputs: `op` is an out= or
// in-place overload writing into them, or a functional overload whose
// results the provider copies into `results_into`. Tensors in `args` are
// device tensors, except CPU 0-dim tensors that stand for scalars (private
// copies, so a later write to the user's tensor does not reach queued work).
struct AtenCall {
  c10::OperatorHandle op;
  torch::jit::Stack args;
  c10::SmallVector<at::Tensor, 3> results_into;
  const AtenOpFamily* family = nullptr;
  // Set where `op` is the out= twin standing in for the functional overload
  // the user called (args = the functional's arguments, then the outputs).
  std::optional<TwinOf> twin_of;
};

// Elements of `t`.
inline int64_t numel_of(const TensorArg& t) {
  int64_t n = 1;
  for (int64_t s : t.sizes) {
    n *= s;
  }
  return n;
}

// Whether `t` is row-major contiguous (size-1 dimensions' strides ignored).
inline bool is_contiguous(const TensorArg& t) {
  int64_t expected = 1;
  for (int64_t i = static_cast<int64_t>(t.sizes.size()) - 1; i >= 0; --i) {
    if (t.sizes[i] != 1 && t.strides[i] != expected) {
      return false;
    }
    expected *= t.sizes[i];
  }
  return true;
}

// PyTorch's floating dtypes, the domain of float-only kernels.
inline std::vector<c10::ScalarType> floating_dtypes() {
  return {c10::ScalarType::Float, c10::ScalarType::Half,
          c10::ScalarType::BFloat16, c10::ScalarType::Double};
}

// The dtypes elementwise kernels of both providers cover: PyTorch's floating
// types and the integer types InfiniOps has (bool only where asked for).
inline std::vector<c10::ScalarType> numeric_dtypes(bool with_bool) {
  using c10::ScalarType;
  std::vector<ScalarType> dtypes = {
      ScalarType::Float, ScalarType::Half, ScalarType::BFloat16,
      ScalarType::Double, ScalarType::Char, ScalarType::Short,
      ScalarType::Int, ScalarType::Long, ScalarType::Byte};
  if (with_bool) {
    dtypes.push_back(ScalarType::Bool);
  }
  return dtypes;
}

// The declared support matrix of one op on one provider backend.
struct OpSupport {
  std::string op;  // ATen schema name, e.g. "aten::add.Tensor"
  std::vector<c10::ScalarType> dtypes;
  bool alpha = false;      // alpha != 1 is computed
  bool broadcast = false;  // inputs with stride-0 (broadcast) dimensions
  bool strided = false;    // non-contiguous inputs and outputs
  std::string kernel;      // what runs it, e.g. "infini::ops::Add"
};

// The support row of an ATen op family (op: "<family>: aten::mm, ...", one
// name per operator whatever its overloads) for the `dtypes` a provider runs.
OpSupport family_support(const AtenOpFamily& family,
                         std::vector<c10::ScalarType> dtypes,
                         std::string kernel);

// Why a provider cannot run an ATen call (OpKernels::aten_unsupported).
struct AtenRefusal {
  // Empty when the provider runs the call; otherwise why not, phrased to
  // follow "<op> on <provider>/<backend> ...".
  std::string reason;
  // Whether the provider's library has no kernel for the call's operator at
  // all on this backend (or one that cannot take the call whatever its
  // values: an ATen out= kernel resizing its output in passing), as opposed
  // to a limit of a kernel it has (a dtype, a layout, its rounding). Only
  // the first may be served by PyTorch's
  // decomposition of the operator: a decomposition around a limit would
  // compute what the kernel refused to (bfloat16 addmm as mm + add rounds
  // twice).
  bool no_kernel = false;

  bool refused() const { return !reason.empty(); }
};

// What a provider did with an ATen call (OpKernels::aten): refused it,
// saying why, or launched it on its library's native kernel or on an
// ATen-backed implementation of it (InfiniOps built WITH_TORCH=ON; the
// coverage report counts those).
struct AtenLaunch {
  AtenRefusal refusal;  // the call was not taken where this is refused
  bool aten_backed = false;
};

class OpKernels {
 public:
  virtual ~OpKernels() = default;

  // Every op this provider serves, with its support matrix.
  virtual const std::vector<OpSupport>& support() const = 0;

  // Empty when the provider can run `args`; otherwise why not, phrased to
  // follow "<op> on <provider>/<backend> ...". Checked before every launch
  // because some native libraries abort the process on input they cannot run.
  virtual std::string binary_unsupported(const BinaryArgs& args) const = 0;
  // Enqueues the element-wise op on `stream` of `device`.
  virtual void binary(int device, StreamHandle stream,
                      const BinaryArgs& args) = 0;
  // Whether the provider has a kernel of its own for `op` at all; where it
  // has not, the op's calls go to the generic kernel (aten) as any other.
  virtual bool has_binary(BinaryOp op) const = 0;

  // Whether the provider has a kernel of its own for `op`; where it has not
  // (the default), the op's calls go to the generic kernel.
  virtual bool has_rowwise(RowwiseOp /*op*/) const { return false; }
  // Enqueues the op on `stream` of `device` (only where has_rowwise).
  virtual void rowwise(int /*device*/, StreamHandle /*stream*/,
                       const RowwiseArgs& /*args*/) {
    TORCH_CHECK(false, "this provider has no row-wise kernel");
  }

  // Strided and dtype-converting copies on the device (contiguous copies of
  // one dtype go through Provider::memcpy_async instead).
  virtual std::string copy_unsupported(const CopyArgs& args) const = 0;
  virtual void copy(int device, StreamHandle stream, const CopyArgs& args) = 0;

  // Fills on the device. Where a provider has no fill kernel the ops layer
  // fills through a copy of a host-prepared buffer instead.
  virtual std::string fill_unsupported(const FillArgs& args) const = 0;
  virtual void fill(int device, StreamHandle stream, const FillArgs& args) = 0;

  // Generic ATen calls (ops/aten/aten_kernel.cpp, then serve below). A
  // provider that does not run CPU kernels serves the families of
  // runtime/aten_ops.h it maps onto its library, and refuses the rest with
  // a reason: here, for a caller that asks before it runs the call another
  // way (ops/arithmetic.cpp), and from aten() below.
  virtual AtenRefusal aten_unsupported(const AtenCall& call) const = 0;
  // Whether the provider maps `overload` ("aten::abs.out") onto its library
  // beyond the families of runtime/aten_ops.h (the Infini provider's
  // generic InfiniOps binding): calls of it are planned and queued as the
  // families' are, and refused per call by aten_unsupported.
  virtual bool maps(const std::string& overload) const { return false; }
  // Launches the call on `stream` of `device`, taking what it keeps from
  // `call` (moved from, never copied: one hand-over per call); or refuses
  // it as aten_unsupported would, leaving `call` as it was. One decision
  // per call: the generic kernel asks nothing before it.
  virtual AtenLaunch aten(int device, StreamHandle stream, AtenCall& call) = 0;

  // Whether the provider has a kernel of its own for `op`, whatever a
  // call's dtypes and layouts (which aten_unsupported judges per call): the
  // host runtime for every operator with a CPU kernel, the Infini stack for
  // what it maps onto InfiniOps. A path that only one operator's kernel
  // takes (CPU's flash attention, oneDNN's LSTM, CPU's fused RNN cells) is
  // chosen where the provider has that kernel.
  virtual bool has_kernel(const c10::OperatorHandle& op) const {
    return maps(c10::toString(op.operator_name()));
  }
  // Whether the provider runs operators on sparse COO tensors (as CPU's
  // kernels on copies of their tensors, ops/sparse/sparse_coo.h: exact only
  // where the provider's kernels are CPU's). InfiniOps has no sparse
  // kernels.
  virtual bool has_sparse_kernels() const { return false; }

  // Runs one generic-kernel call, the provider's way (runtime/generic_call.h):
  // by default as a provider that maps operators onto its library does,
  // laid out by a meta run and queued where it maps the call.
  virtual void serve(GenericCall& call);
};

// The selected provider's kernels.
OpKernels& kernels();

}  // namespace torch_infini::runtime
