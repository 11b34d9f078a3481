#pragma once

// The generic InfiniOps binding: ATen overloads bound to InfiniOps operators
// by their public signatures. InfiniOps' API follows ATen's `.out` schemas
// (`self` -> `input`, outputs last, Scalar -> double, ...): the build reads
// the installed operators and generates the table (tools/infiniops_binding.py
// writes one make_binding<Op, Types...>(...) per bound overload; nothing of
// it is committed). An operator InfiniOps gains later costs no code here.
//
// Per call the implementation is chosen (infini_binding.cpp): of the native
// one for the device and the ATen-backed one (index 8, InfiniOps built
// WITH_TORCH=ON), the one measured faster on the backend first
// (implementation_choice.h), the other where the build lacks it or the call
// is beyond its limits; never an index the build lacks (InfiniOps aborts the
// process on one). Everything InfiniOps would reject is checked before the
// call.

#include <ATen/core/ivalue.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/infini/aten_backed_completion.h"
#include "runtime/infini/implementation_choice.h"
#include "runtime/infini/infini_common.h"
#include "runtime/infini/operator_cache.h"
#include "runtime/kernels.h"

namespace torch_infini::runtime::infini {

// How one InfiniOps argument is made from a boxed ATen value.
enum class ArgKind : uint8_t {
  kTensor, kOptionalTensor, kTensorList, kOptionalTensorList,
  kScalar, kOptionalScalar,  // ATen Scalar read as a double (checked per call)
  kDouble, kOptionalDouble, kInt, kOptionalInt, kBool, kOptionalBool,
  kIntList, kOptionalIntList, kOptionalDoubleList,
  kDataType, kOptionalDataType, kString, kOptionalString,
};

struct ArgConversion {
  ArgKind kind;
  int aten_index;  // the ATen argument it comes from
  bool output;     // an output tensor (written)
};

// One call being launched: the boxed arguments (CPU scalars already
// replaced by device tensors) and where it runs.
struct Launch {
  InfiniProvider* provider;
  int device;
  StreamHandle stream;
  int implementation;
  const std::vector<c10::IValue>* args;
  const std::vector<ArgConversion>* conversions;
  // Non-empty: inputs are passed broadcast to these sizes (NativeLimits).
  c10::IntArrayRef broadcast_to;
};

using LaunchFn = void (*)(const Launch&);

struct Binding {
  std::string aten;      // "aten::sum.IntList_out" (or an in-place overload)
  std::string op;        // "Sum"
  std::vector<ArgConversion> conversions;  // in InfiniOps' parameter order
  std::vector<int> must_be_none;  // ATen arguments InfiniOps' API leaves out
  std::vector<Implementation> implementations;
  LaunchFn launch;
};

// A native implementation's limits where they differ from ATen's semantics
// (infini_native.cpp), by InfiniOps operator.
struct NativeLimits {
  // Empty when the native implementation runs `call` exactly as PyTorch.
  std::string (*check)(const Binding& b, const AtenCall& call);
  // Inputs are passed as same-rank stride-0 views of the output's shape.
  bool broadcast_inputs;
};
const NativeLimits* native_limits(const std::string& op);

// The generated table (build directory: infini_bindings_*.cpp).
const std::vector<Binding>& generated_bindings();

// Every implementation libinfiniops has of InfiniOps operator `op`
// ("Gemm"), bound or not (generated with the table).
const std::vector<Implementation>& operator_implementations(
    const std::string& op);

namespace binding_detail {

inline TensorArg arg_of_tensor(const at::Tensor& t) { return arg_of(t); }

// An input is passed broadcast to `l.broadcast_to` where the native
// implementation walks inputs with the output's rank.
inline iops::Tensor tensor_of(const Launch& l, const at::Tensor& t,
                              bool output) {
  const irt::Device where(l.provider->device_type(), l.device);
  if (!output && !l.broadcast_to.empty()) {
    return view_of(expanded(arg_of(t), l.broadcast_to), where);
  }
  return view_of(arg_of(t), where);
}

inline iops::DataType data_type_of(c10::ScalarType t) {
  irt::DataType d = irt::DataType::kFloat32;
  to_infini_dtype(t, &d);
  return d;
}

template <typename T>
struct Convert;

template <>
struct Convert<iops::Tensor> {
  static iops::Tensor get(const Launch& l, const c10::IValue& v, bool output = false) {
    return tensor_of(l, v.toTensor(), output);
  }
};
template <>
struct Convert<std::optional<iops::Tensor>> {
  static std::optional<iops::Tensor> get(const Launch& l, const c10::IValue& v, bool output = false) {
    if (v.isNone() || !v.toTensor().defined()) {
      return std::nullopt;
    }
    return tensor_of(l, v.toTensor(), output);
  }
};
template <>
struct Convert<std::vector<iops::Tensor>> {
  static std::vector<iops::Tensor> get(const Launch& l, const c10::IValue& v, bool output = false) {
    std::vector<iops::Tensor> out;
    for (const at::Tensor& t : v.toTensorList()) {
      out.push_back(tensor_of(l, t, output));
    }
    return out;
  }
};
template <>
struct Convert<std::vector<std::optional<iops::Tensor>>> {
  static std::vector<std::optional<iops::Tensor>> get(const Launch& l,
                                                      const c10::IValue& v, bool output = false) {
    std::vector<std::optional<iops::Tensor>> out;
    for (const c10::IValue& e : v.toListRef()) {
      out.push_back(Convert<std::optional<iops::Tensor>>::get(l, e, output));
    }
    return out;
  }
};
template <>
struct Convert<double> {
  static double get(const Launch&, const c10::IValue& v, bool = false) {
    return v.isScalar() ? v.toScalar().toDouble() : v.toDouble();
  }
};
template <>
struct Convert<std::optional<double>> {
  static std::optional<double> get(const Launch& l, const c10::IValue& v, bool output = false) {
    if (v.isNone()) return std::nullopt;
    return Convert<double>::get(l, v, output);
  }
};
template <>
struct Convert<int64_t> {
  static int64_t get(const Launch&, const c10::IValue& v, bool = false) { return v.toInt(); }
};
template <>
struct Convert<std::optional<int64_t>> {
  static std::optional<int64_t> get(const Launch&, const c10::IValue& v, bool = false) {
    if (v.isNone()) return std::nullopt;
    return v.toInt();
  }
};
template <>
struct Convert<bool> {
  static bool get(const Launch&, const c10::IValue& v, bool = false) { return v.toBool(); }
};
template <>
struct Convert<std::optional<bool>> {
  static std::optional<bool> get(const Launch&, const c10::IValue& v, bool = false) {
    if (v.isNone()) return std::nullopt;
    return v.toBool();
  }
};
template <>
struct Convert<std::vector<int64_t>> {
  static std::vector<int64_t> get(const Launch&, const c10::IValue& v, bool = false) {
    return v.isInt() ? std::vector<int64_t>{v.toInt()} : v.toIntVector();
  }
};
template <>
struct Convert<std::optional<std::vector<int64_t>>> {
  static std::optional<std::vector<int64_t>> get(const Launch& l,
                                                 const c10::IValue& v, bool output = false) {
    if (v.isNone()) return std::nullopt;
    return Convert<std::vector<int64_t>>::get(l, v, output);
  }
};
template <>
struct Convert<std::optional<std::vector<double>>> {
  static std::optional<std::vector<double>> get(const Launch&,
                                                const c10::IValue& v, bool = false) {
    if (v.isNone()) return std::nullopt;
    return v.toDoubleVector();
  }
};
template <>
struct Convert<iops::DataType> {
  static iops::DataType get(const Launch&, const c10::IValue& v, bool = false) {
    return data_type_of(v.toScalarType());
  }
};
template <>
struct Convert<std::optional<iops::DataType>> {
  static std::optional<iops::DataType> get(const Launch&, const c10::IValue& v, bool = false) {
    if (v.isNone()) return std::nullopt;
    return data_type_of(v.toScalarType());
  }
};
template <>
struct Convert<std::string> {
  static std::string get(const Launch&, const c10::IValue& v, bool = false) {
    return v.toStringRef();
  }
};
template <>
struct Convert<std::optional<std::string>> {
  static std::optional<std::string> get(const Launch&, const c10::IValue& v, bool = false) {
    if (v.isNone()) return std::nullopt;
    return v.toStringRef();
  }
};

// The key of an operator object: everything its constructor saw (layouts,
// dtypes and the other arguments' values), and the implementation.
void append_key(OperatorKey& key, const c10::IValue& v);

// InfiniOps' Make, reached through the library's instantiation (a pointer
// the compiler cannot replace with an inlined copy, which would see no
// implementations).
template <typename Op, typename First, typename... Rest>
struct MakeOf {
  using Fn = std::unique_ptr<iops::Operator<Op>> (*)(const iops::Config&,
                                                     const First,
                                                     const Rest&...);
  static inline Fn volatile make =
      &iops::Operator<Op>::template Make<const Rest&...>;
};

// Whether a launch of `op` may run on the calling thread's single OpenMP
// thread (small outputs on the CPU backend).
bool serial(const Launch& l);

template <typename Op, typename Completion, typename... Ts, size_t... I>
void launch_impl(const Launch& l, std::index_sequence<I...>) {
  using Operator = iops::Operator<Op>;
  const auto& conv = *l.conversions;
  const auto& args = *l.args;
  std::tuple<Ts...> values{
      Convert<Ts>::get(l, args[conv[I].aten_index], conv[I].output)...};
  OperatorKey key;
  key.words.push_back(l.device);
  key.words.push_back(l.implementation);
  for (const auto& c : conv) {
    append_key(key, args[c.aten_index]);
  }
  thread_local OperatorCache<Operator> cache;
  l.provider->bind(l.device);
  const SerialOpenMPScope one_thread(serial(l));
  Operator& op = cache.get(std::move(key), [&] {
    iops::Config config;
    config.set_implementation_index(static_cast<size_t>(l.implementation));
    std::unique_ptr<Operator> made;
    if (Completion::kCompleted && l.implementation == kAtenBackedIndex) {
      made = Completion::make(static_cast<int>(l.provider->device_type()),
                              std::get<I>(values)...);
      if (made != nullptr) made->set_config(config);
    } else {
      made = MakeOf<Op, Ts...>::make(config, std::get<I>(values)...);
    }
    // Release builds of InfiniOps return null where an implementation has no
    // constructor for the arguments (its assert is compiled out).
    TORCH_CHECK(made != nullptr, "infini: InfiniOps' ", typeid(Op).name(),
                " implementation ", l.implementation,
                " cannot be made for these arguments");
    return made;
  });
  op.set_stream(l.stream);
  static_cast<const Op&>(op)(std::get<I>(values)...);
}

template <typename Op, typename Completion, typename... Ts>
void launch(const Launch& l) {
  launch_impl<Op, Completion, Ts...>(l, std::index_sequence_for<Ts...>{});
}

}  // namespace binding_detail

template <typename Op, typename Completion, typename... Ts>
Binding make_binding(const char* aten, const char* op,
                     std::vector<ArgConversion> conversions,
                     std::vector<int> must_be_none,
                     std::vector<Implementation> implementations) {
  return Binding{aten, op, std::move(conversions), std::move(must_be_none),
                 std::move(implementations),
                 &binding_detail::launch<Op, Completion, Ts...>};
}

// Serves the bound overloads: finds a call's binding, checks it, picks the
// implementation and launches it.
class GenericServer {
 public:
  explicit GenericServer(InfiniProvider& provider);

  // The binding of `overload` ("aten::abs.out", "aten::abs_"), or nullptr.
  const Binding* find(const std::string& overload) const;

  // Empty when `b` runs `call`, with the implementation to use; otherwise
  // why not. `native_allowed` is false where a hand-written entry owns the
  // native implementation's limits (and refused the call). `cannot_take` is
  // set where the build's implementations cannot take the call at all,
  // whatever their rounding (InfiniOps' API cannot express an argument, or
  // the only implementation is an ATen out= kernel that resizes its output
  // in passing): PyTorch's decomposition may then serve it.
  std::string choose(const Binding& b, const AtenCall& call,
                     bool native_allowed, int* implementation,
                     bool* cannot_take = nullptr) const;

  // Whether this build has a native or ATen-backed implementation of `b`'s
  // operator for the provider's backend.
  bool has_kernel(const Binding& b) const;

  // Which kind of `b`'s operator was measured faster on the provider's
  // backend for `call`'s size (runtime/implementation_preferences.h).
  ImplementationKind faster(const Binding& b, const AtenCall& call) const;

  // Launches a call `choose` accepted, on `stream`.
  void run(const Binding& b, int device, StreamHandle stream,
           const AtenCall& call, int implementation);

  const std::unordered_map<std::string, const Binding*>& bindings() const {
    return by_overload_;
  }

 private:
  InfiniProvider& provider_;
  std::unordered_map<std::string, const Binding*> by_overload_;
};

// The implementation index a hand-written entry runs InfiniOps' `op` with
// on `provider`'s backend for an output of `numel` elements: InfiniOps' own
// hand-written ATen-backed one (`aten_index`: Add's 1, Gemm's 2) where the
// build has it and it was measured faster there for outputs of `numel`
// elements of `dtype` (a size class where the call is `measured_form`,
// runtime/implementation_preferences.h), or where nothing was measured and
// `aten_when_unmeasured`; else the native one (0).
size_t hand_written_index(const InfiniProvider& provider, const char* op,
                          int aten_index, int64_t numel, c10::ScalarType dtype,
                          bool aten_when_unmeasured, bool measured_form = true);

// Whether operands handed to a kernel (inputs broadcast as stride-0 views)
// are in the form implementation speeds were measured in: each contiguous,
// or one element broadcast (every stride 0).
bool in_measured_form(std::initializer_list<const TensorArg*> operands);

// "native" or "ATen-backed".
std::string implementation_label(int index);

}  // namespace torch_infini::runtime::infini
