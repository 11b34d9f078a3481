// Kernels of the built-in host runtime: CPU ATen kernels run on a stream's
// worker over aliases of device memory. This makes the host runtime the
// numerical oracle by construction; what it proves is the plumbing (layouts,
// lifetimes, ordering).

#include <ATen/ATen.h>
#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <optional>
#include <type_traits>

#include "runtime/device_trace.h"
#include "runtime/host/host_aliases.h"
#include "runtime/host/host_direct.h"
#include "runtime/host/host_provider.h"
#include "runtime/host/memory_protection.h"
#include "runtime/host/task_memory.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::host {
namespace {

// A CPU tensor over device memory; valid only on the thread running the
// call, while the allocator keeps the memory alive for the stream's queued
// work. From the thread's AliasPool: building and destroying an alias
// (at::from_blob, as this did) was about 3 K of a one-element softmax's
// 16 K instructions.
at::Tensor alias(const TensorArg& t) {
  TensorLayout layout;
  layout.storage_data = t.data;
  // The memory the view spans (its data pointer is the view's first element).
  int64_t last = 0;
  bool empty = false;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    empty = empty || t.sizes[d] == 0;
    last += (t.sizes[d] - 1) * t.strides[d];
  }
  layout.dtype = c10::scalarTypeToTypeMeta(t.dtype);
  layout.storage_nbytes =
      empty ? 0 : static_cast<size_t>(last + 1) * layout.dtype.itemsize();
  layout.sizes = t.sizes;
  layout.strides = t.strides;
  return thread_alias_pool().alias_of(layout);
}

// The written tensor arguments of a queued call. A CPU out= kernel may use
// its output as scratch of another shape (huber_loss.out: elementwise loss,
// then the reduction): the alias's storage then grows into host memory, and
// the final value is copied back into the device memory. A final shape the
// call's metadata did not foresee fails loudly, never truncates.
struct WrittenArgs {
  struct Arg {
    at::Tensor used;  // what the kernel writes (its storage may move)
    void* home = nullptr;  // the device memory it had before the call
    c10::SmallVector<int64_t, 6> sizes;
    c10::SmallVector<int64_t, 6> strides;
    bool conj = false;  // its conjugate and negative bits before the call
    bool neg = false;

    // What the kernel did besides writing values where they were: it moved
    // the storage, restrided the output (transpose_ not undone), or flipped
    // its conjugate or negative bit (linalg_lu_solve.out with left=False
    // returns its result as a conjugate view). A queued call's layout was
    // settled at the call, so the values must then be put back as laid out.
    bool rewritten() const {
      return used.numel() > 0 &&
          (used.data_ptr() != home || used.strides() != c10::IntArrayRef(strides) ||
           used.is_conj() != conj || used.is_neg() != neg);
    }

    // The device memory as the call laid it out.
    at::Tensor at_home() const {
      at::Tensor t = at::from_blob(home, sizes, strides, used.options());
      t._set_conj(conj);
      t._set_neg(neg);
      return t;
    }
  };
  // Per queued call: no heap allocation for the usual one or two outputs,
  // and a tensor over the device memory only where the storage moved.
  c10::SmallVector<Arg, 2> args;

  WrittenArgs(const c10::FunctionSchema& schema, const torch::jit::Stack& stack) {
    for (size_t i = 0; i < schema.arguments().size() && i < stack.size();
         ++i) {
      const auto* alias = schema.arguments()[i].alias_info();
      if (alias != nullptr && alias->isWrite() && stack[i].isTensor()) {
        const at::Tensor& t = stack[i].toTensor();
        args.push_back({t, t.numel() == 0 ? nullptr : t.data_ptr(),
                        {t.sizes().begin(), t.sizes().end()},
                        {t.strides().begin(), t.strides().end()},
                        t.is_conj(), t.is_neg()});
      }
    }
  }

  // Whether the kernel wrote every output where and as it was laid out.
  bool in_place() const {
    return std::all_of(args.begin(), args.end(), [](const Arg& arg) {
      return arg.used.sizes() == c10::IntArrayRef(arg.sizes) &&
          !arg.rewritten();
    });
  }

  // Copies `results` (one per written argument, in order) into the device
  // memory the written arguments had before the call.
  void copy_home(const c10::OperatorName& op,
                 const std::vector<at::Tensor>& results) const {
    TORCH_CHECK(results.size() == args.size(), op, " on infini: ",
                results.size(), " results for ", args.size(),
                " outputs; please report it");
    for (size_t i = 0; i < args.size(); ++i) {
      const Arg& arg = args[i];
      TORCH_CHECK(results[i].defined() &&
                      results[i].sizes() == c10::IntArrayRef(arg.sizes),
                  op, " on infini: result ", i, " differs from the call's "
                  "metadata; please report it");
      if (arg.home != nullptr) {
        arg.at_home().copy_(results[i]);
      }
    }
  }

  void finish(const c10::OperatorName& op) const {
    for (const Arg& arg : args) {
      TORCH_CHECK(arg.used.sizes() == c10::IntArrayRef(arg.sizes), op,
                  " on infini: the CPU kernel resized an output from ",
                  c10::IntArrayRef(arg.sizes), " to ", arg.used.sizes(),
                  ", which the call's metadata did not foresee (the result's "
                  "shape depends on the data); please report it");
      if (arg.rewritten()) {
        // Over the same memory, through a copy: the two views overlap.
        arg.at_home().copy_(arg.used.data_ptr() == arg.home
                                ? arg.used.clone()
                                : arg.used);
      }
    }
  }
};

// The new results an overload left on the stack (its returns that are not
// written arguments), flattened.
std::vector<at::Tensor> flat_results(const c10::FunctionSchema& schema,
                                     const torch::jit::Stack& stack) {
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < stack.size(); ++i) {
    const auto* written = schema.returns()[i].alias_info();
    if (written != nullptr && written->isWrite()) {
      continue;
    }
    const c10::IValue& value = stack[i];
    if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        out.push_back(t);
      }
    } else {
      out.push_back(value.isTensor() ? value.toTensor() : at::Tensor());
    }
  }
  return out;
}

// Warnings held back until it is known whether the call that raised them
// stands (an out= twin's, see run_twin).
class HeldWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning& warning) override {
    held_.push_back(warning);
  }
  void release() const {
    for (const c10::Warning& warning : held_) {
      c10::WarningUtils::get_warning_handler()->process(warning);
    }
  }

 private:
  std::vector<c10::Warning> held_;
};

// Builds a call's stack of CPU aliases again, with fresh aliases.
using FreshArgs = c10::function_ref<torch::jit::Stack(Aliases&)>;

// Runs `twin`, an out= overload standing in for a functional one, with
// `args` (the functional's arguments, then its outputs). A twin that did not
// write its outputs in place is not equivalent to the functional overload
// (runtime::TwinOf): its values and warnings are dropped, the functional
// overload runs on fresh aliases and its results are copied into the
// outputs, and the operator is marked so that later calls queue the
// functional overload.
void run_twin(const c10::OperatorHandle& twin, const TwinOf& of,
              FreshArgs fresh_args, torch::jit::Stack args) {
  const WrittenArgs written(twin.schema(), args);
  HeldWarnings warnings;
  {
    c10::WarningUtils::WarningHandlerGuard hold(&warnings);
    twin.callBoxed(args);
  }
  if (written.in_place()) {
    warnings.release();
    return;
  }
  of.refuted->store(true, std::memory_order_relaxed);
  Aliases fresh;
  torch::jit::Stack functional_args = fresh_args(fresh);
  functional_args.resize(of.functional.schema().arguments().size());
  of.functional.callBoxed(functional_args);
  written.copy_home(of.functional.operator_name(),
                    flat_results(of.functional.schema(), functional_args));
}

// One element of a BinaryOp with alpha == 1. Integers wrap as ATen's do
// (computed unsigned: signed overflow is undefined in C++).
template <typename T, bool = std::is_integral_v<T>>
struct Wrapping {
  using type = T;
};
template <typename T>
struct Wrapping<T, true> {
  using type = std::make_unsigned_t<T>;
};

template <BinaryOp kOp, typename T>
T binary_element(T x, T y) {
  using Wide = typename Wrapping<T>::type;
  const Wide a = static_cast<Wide>(x);
  const Wide b = static_cast<Wide>(y);
  if constexpr (kOp == BinaryOp::kAdd) {
    return static_cast<T>(a + b);
  } else if constexpr (kOp == BinaryOp::kSub) {
    return static_cast<T>(a - b);
  } else {
    return static_cast<T>(a * b);
  }
}

// A small, dense, alpha == 1 call of float32, float64, int32 or int64, by
// its memory and size alone: an element loop gives exactly ATen's result
// (one rounding of a + b, a - b or a * b) without building three alias
// tensors and a TensorIterator per task, which dominate a small call; and
// queued, it fits a task's inline storage, where the whole BinaryArgs
// (three layouts) takes a block of task memory.
struct DenseBinary {
  const void* self;
  const void* other;
  void* out;
  int64_t numel;
  c10::ScalarType dtype;
  BinaryOp op;
};

std::optional<DenseBinary> small_dense(const BinaryArgs& args) {
  constexpr int64_t kSmall = 4096;
  const c10::ScalarType dtype = args.out.dtype;
  if (!args.alpha.equal(1) || !is_contiguous(args.self) ||
      !is_contiguous(args.other) || !is_contiguous(args.out) ||
      (dtype != c10::ScalarType::Float && dtype != c10::ScalarType::Double &&
       dtype != c10::ScalarType::Int && dtype != c10::ScalarType::Long)) {
    return std::nullopt;
  }
  const int64_t n = numel_of(args.out);
  if (n > kSmall) {
    return std::nullopt;
  }
  return DenseBinary{args.self.data, args.other.data, args.out.data, n, dtype,
                     args.op};
}

// On x86-64, the loop is compiled twice, for AVX2 and for the baseline
// (SSE2), and the loader picks one per machine (an ifunc): ATen's CPU
// kernels are AVX2 there, and with SSE2 alone a 4Ki-element add took 2.0 us
// against CPU eager's 1.2. Each element is one IEEE operation either way, so
// the result's bits do not depend on the clone. GCC only: Clang refuses
// target_clones on function templates.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    defined(__has_attribute)
#if __has_attribute(target_clones)
#define TORCH_INFINI_AVX2_CLONE __attribute__((target_clones("avx2", "default")))
#endif
#endif
#ifndef TORCH_INFINI_AVX2_CLONE
#define TORCH_INFINI_AVX2_CLONE
#endif

template <BinaryOp kOp, typename T>
TORCH_INFINI_AVX2_CLONE void run_dense_as(const DenseBinary& call) {
  const T* x = static_cast<const T*>(call.self);
  const T* y = static_cast<const T*>(call.other);
  T* z = static_cast<T*>(call.out);
  const int64_t n = call.numel;
  // In blocks of a fixed count, each read whole before it is written, as
  // vectors of the compiler's (GCC's and Clang's vector extension): a block
  // is then a load of each operand, one operation and one store. One loop
  // over all elements stays scalar (out may alias an input, in place, and
  // -O2 adds no run-time check for that), and a block computed into an
  // array was stored through the stack, element by element. Integers
  // compute in their unsigned type, which wraps as ATen's kernels do.
  using Wide = typename Wrapping<T>::type;
  constexpr int64_t kBlock = 8;
  typedef Wide Block __attribute__((vector_size(kBlock * sizeof(Wide))));
  static_assert(sizeof(Block) == kBlock * sizeof(T), "a vector of kBlock");
  int64_t i = 0;
  for (; i + kBlock <= n; i += kBlock) {
    Block a;
    Block b;
    std::memcpy(&a, x + i, sizeof(Block));
    std::memcpy(&b, y + i, sizeof(Block));
    Block c;
    if constexpr (kOp == BinaryOp::kAdd) {
      c = a + b;
    } else if constexpr (kOp == BinaryOp::kSub) {
      c = a - b;
    } else {
      c = a * b;
    }
    std::memcpy(z + i, &c, sizeof(Block));
  }
  for (; i < n; ++i) {
    z[i] = binary_element<kOp>(x[i], y[i]);
  }
}

template <BinaryOp kOp>
void run_dense_of(const DenseBinary& call) {
  switch (call.dtype) {
    case c10::ScalarType::Float:
      return run_dense_as<kOp, float>(call);
    case c10::ScalarType::Double:
      return run_dense_as<kOp, double>(call);
    case c10::ScalarType::Int:
      return run_dense_as<kOp, int32_t>(call);
    default:  // Long (small_dense takes no other)
      return run_dense_as<kOp, int64_t>(call);
  }
}

void run_dense(const DenseBinary& call) {
  switch (call.op) {
    case BinaryOp::kAdd:
      return run_dense_of<BinaryOp::kAdd>(call);
    case BinaryOp::kSub:
      return run_dense_of<BinaryOp::kSub>(call);
    case BinaryOp::kMul:
      return run_dense_of<BinaryOp::kMul>(call);
  }
}

// A call small_dense does not take: ATen's CPU kernel on aliases.
void run_binary(const BinaryArgs& args) {
  // Plain CPU compute: skip autograd and view tracking.
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::Tensor out = alias(args.out);
  const at::Tensor self = alias(args.self);
  const at::Tensor other = alias(args.other);
  switch (args.op) {
    case BinaryOp::kAdd:
      at::add_out(out, self, other, args.alpha);
      return;
    case BinaryOp::kSub:
      at::sub_out(out, self, other, args.alpha);
      return;
    case BinaryOp::kMul:
      at::mul_out(out, self, other);
      return;
  }
}

// ATen's CPU kernel of a RowwiseOp, on aliases.
void run_rowwise(const RowwiseArgs& args) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  at::Tensor out = alias(args.out);
  const at::Tensor self = alias(args.self);
  if (args.op == RowwiseOp::kSoftmax) {
    at::_softmax_out(out, self, args.dim, /*half_to_float=*/false);
  } else {
    at::_log_softmax_out(out, self, args.dim, /*half_to_float=*/false);
  }
}

// The profiler's name of a BinaryOp's task.
const char* binary_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "aten::add";
    case BinaryOp::kSub:
      return "aten::sub";
    case BinaryOp::kMul:
      return "aten::mul";
  }
  return "aten::binary";
}

// Every dtype of the device's own kernels here: PyTorch's numeric types,
// bool and the complex types (the add kernel hands bool and complex calls to
// the generic kernel, which runs CPU's).
std::vector<c10::ScalarType> host_dtypes() {
  auto dtypes = numeric_dtypes(/*with_bool=*/true);
  dtypes.insert(dtypes.end(), {c10::ScalarType::ComplexFloat,
                               c10::ScalarType::ComplexDouble,
                               c10::ScalarType::ComplexHalf});
  return dtypes;
}

// A call of the generic kernel, run where the stream runs it: `op` over
// `args`, CPU aliases of its device tensors, its results copied into
// `results_into` (aliases of the outputs of a functional overload).
void run_on_aliases(const c10::OperatorHandle& op, torch::jit::Stack args,
                    c10::ArrayRef<at::Tensor> results_into,
                    const std::optional<TwinOf>& twin_of,
                    FreshArgs fresh_args) {
  at::AutoDispatchBelowADInplaceOrView below_autograd;
  if (twin_of) {
    run_twin(op, *twin_of, fresh_args, std::move(args));
    return;
  }
  WrittenArgs written(op.schema(), args);
  op.callBoxed(args);
  written.finish(op.operator_name());
  if (results_into.empty()) {
    return;
  }
  // A functional overload leaves its results on the stack: they
  // must be what the outputs were allocated for.
  const auto results = flat_results(op.schema(), args);
  TORCH_CHECK(results.size() == results_into.size(),
              op.operator_name(), " on infini: ", results.size(),
              " results where ", results_into.size(), " were expected");
  for (size_t i = 0; i < results.size(); ++i) {
    const at::Tensor& into = results_into[i];
    if (!into.defined()) {
      continue;
    }
    TORCH_CHECK(results[i].defined() &&
                    results[i].sizes() == into.sizes() &&
                    results[i].scalar_type() == into.scalar_type(),
                op.operator_name(), " on infini: result ", i,
                " differs from the call's metadata (the result's "
                "shape depends on the data); please report it");
    into.copy_(results[i]);
  }
}

// A queued call, from the snapshots taken when it was queued.
void run_queued(const c10::OperatorHandle& op, const QueuedArgs& queued,
                const std::optional<TwinOf>& twin_of) {
  Aliases aliases(&thread_alias_pool());
  torch::jit::Stack args = queued.stack(aliases);
  run_on_aliases(op, std::move(args), queued.results(aliases), twin_of,
                 [&queued](Aliases& fresh) { return queued.stack(fresh); });
}

// A call run at once (HostStream::run_now), from its own tensors.
void run_call_now(const AtenCall& call) {
  Aliases aliases(&thread_alias_pool());
  torch::jit::Stack args = aliases.convert_all(call.args);
  c10::SmallVector<at::Tensor, 3> results_into;
  for (const at::Tensor& t : call.results_into) {
    results_into.push_back(aliases.of(t));
  }
  run_on_aliases(call.op, std::move(args), results_into, call.twin_of,
                 [&call](Aliases& fresh) {
                   return fresh.convert_all(call.args);
                 });
}

// What a generic-kernel call raised where it ran, for a later
// synchronization: the message names the operator that failed, as the call
// is long gone.
[[noreturn]] void rethrow_as_call_error(const c10::OperatorHandle& op,
                                        const c10::Error& e) {
  TORCH_CHECK(false, op.operator_name(), ": ", e.what_without_backtrace());
}

class HostKernels final : public OpKernels {
 public:
  explicit HostKernels(HostProvider& provider) : provider_(provider) {
    // The element-wise table (ops/arithmetic.cpp), one row per op.
    for (const char* op : {"aten::add.Tensor", "aten::sub.Tensor",
                           "aten::mul.Tensor"}) {
      support_.push_back(OpSupport{
          op, host_dtypes(), /*alpha=*/std::string(op) != "aten::mul.Tensor",
          /*broadcast=*/true, /*strided=*/true,
          "ATen CPU kernel on the stream's worker"});
    }
    // The row-wise table (ops/rowwise.cpp); strided inputs take the
    // generic kernel.
    for (const char* op : {"aten::_softmax", "aten::_log_softmax"}) {
      support_.push_back(OpSupport{
          op, floating_dtypes(), /*alpha=*/false, /*broadcast=*/false,
          /*strided=*/false, "ATen CPU kernel on the stream's worker"});
    }
    support_.push_back(OpSupport{
        "aten::fill_.Scalar (and zero_, fill_.Tensor)",
        host_dtypes(),
        /*alpha=*/false,
        /*broadcast=*/false,
        /*strided=*/true,
        "ATen CPU kernel on the stream's worker"});
    support_.push_back(OpSupport{
        "aten::copy_ (strided or converting, on device)",
        host_dtypes(),
        /*alpha=*/false,
        /*broadcast=*/true,
        /*strided=*/true,
        "ATen CPU kernel on the stream's worker"});
    support_.push_back(OpSupport{
        "every other ATen operator with a CPU kernel (python -m torch_infini "
        "--ops lists them, and which synchronize)",
        host_dtypes(), /*alpha=*/true, /*broadcast=*/true, /*strided=*/true,
        "ATen CPU kernels on the stream's worker (first call of each kind "
        "directly, after the stream)"});
  }

  const std::vector<OpSupport>& support() const override { return support_; }

  AtenRefusal aten_unsupported(const AtenCall& /*call*/) const override {
    return {};  // ATen's CPU kernels run every call the ops layer accepts
  }

  // The first call of each kind directly, later ones queued
  // (runtime/host/host_direct.h).
  void serve(GenericCall& call) override { serve_directly_first(call); }

  AtenLaunch aten(int device, StreamHandle stream, AtenCall& call) override {
    HostStream& host_stream = provider_.stream(device, stream);
    // Where the caller waits for its work as it queues it: run at once, from
    // the call's own tensors (see HostStream::run_now).
    if (host_stream.run_now([&call] {
          try {
            run_call_now(call);
          } catch (const c10::Error& e) {
            rethrow_as_call_error(call.op, e);
          }
        })) {
      return {};
    }
    // Queued: the aliases are made where the call runs (see
    // host_aliases.h). The call is made once on the heap and shared by the
    // task and its copies (a captured graph's replays), never moved.
    struct Queued {
      explicit Queued(AtenCall& call)
          : op(call.op),
            args(std::move(call.args), call.results_into),
            twin_of(std::move(call.twin_of)) {}
      c10::OperatorHandle op;
      QueuedArgs args;
      std::optional<TwinOf> twin_of;
    };
    // In task memory (runtime/host/task_memory.h): made here, freed on the
    // worker.
    std::shared_ptr<const Queued> queued =
        std::allocate_shared<Queued>(task_memory::Allocator<Queued>(), call);
    const c10::OperatorName& name = call.op.operator_name();
    profiler::TaskLabel label(name.name.c_str(), profiler::WorkKind::kKernel,
                              device, stream, name.overload_name.c_str());
    host_stream.enqueue([queued = std::move(queued)] {
      try {
        run_queued(queued->op, queued->args, queued->twin_of);
      } catch (const c10::Error& e) {
        rethrow_as_call_error(queued->op, e);
      }
    });
    return {};  // ATen's CPU kernels run every call the ops layer accepts
  }

  std::string binary_unsupported(const BinaryArgs& /*args*/) const override {
    // ATen's CPU kernels run every dtype (ops/arithmetic.cpp hands the
    // non-numeric ones to the generic kernel, whose first call raises CPU's
    // own error for a dtype CPU's kernel lacks).
    return {};
  }

  bool has_binary(BinaryOp /*op*/) const override { return true; }

  bool has_rowwise(RowwiseOp /*op*/) const override { return true; }

  void rowwise(int device, StreamHandle stream,
               const RowwiseArgs& args) override {
    HostStream& host_stream = provider_.stream(device, stream);
    if (host_stream.run_now([&args] { run_rowwise(args); })) {
      return;
    }
    profiler::TaskLabel label(args.op == RowwiseOp::kSoftmax
                                  ? "aten::_softmax"
                                  : "aten::_log_softmax",
                              profiler::WorkKind::kKernel, device, stream);
    host_stream.enqueue([args] { run_rowwise(args); });
  }

  bool has_kernel(const c10::OperatorHandle& op) const override {
    return op.hasKernelForDispatchKey(c10::DispatchKey::CPU) ||
        op.hasKernelForDispatchKey(c10::DispatchKey::SparseCPU);
  }
  bool has_sparse_kernels() const override { return true; }

  std::string copy_unsupported(const CopyArgs& /*args*/) const override {
    return {};
  }

  std::string fill_unsupported(const FillArgs& /*args*/) const override {
    return {};
  }

  void fill(int device, StreamHandle stream, const FillArgs& args) override {
    profiler::TaskLabel label("aten::fill_", profiler::WorkKind::kKernel,
                              device, stream);
    provider_.stream(device, stream).enqueue([args] {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      alias(args.self).fill_(args.value);
    });
  }

  void copy(int device, StreamHandle stream, const CopyArgs& args) override {
    profiler::TaskLabel label("aten::copy_", profiler::WorkKind::kKernel,
                              device, stream);
    provider_.stream(device, stream).enqueue([args] {
      at::AutoDispatchBelowADInplaceOrView below_autograd;
      at::Tensor dst = alias(args.dst);
      dst.copy_(alias(args.src));
    });
  }

  void binary(int device, StreamHandle stream,
              const BinaryArgs& args) override {
    HostStream& host_stream = provider_.stream(device, stream);
    const std::optional<DenseBinary> dense = small_dense(args);
    if (dense ? host_stream.run_now([&dense] { run_dense(*dense); })
              : host_stream.run_now([&args] { run_binary(args); })) {
      return;
    }
    profiler::TaskLabel label(binary_name(args.op), profiler::WorkKind::kKernel,
                              device, stream);
    if (dense) {
      host_stream.enqueue([call = *dense] { run_dense(call); });
    } else {
      host_stream.enqueue([args] { run_binary(args); });
    }
  }

 private:
  HostProvider& provider_;
  std::vector<OpSupport> support_;
};

}  // namespace

std::unique_ptr<OpKernels> make_host_kernels(HostProvider& provider) {
  return std::make_unique<HostKernels>(provider);
}

}  // namespace torch_infini::runtime::host
