// The generic InfiniOps server: the binding table (infini_binding.h), its
// pre-checks and the implementation chosen per call.
//
// What InfiniOps would reject (it aborts the process) is refused here first:
// - tensors of a dtype InfiniRT has no DataType for (bool, complex), except
//   that a bool tensor is passed as its bytes (uint8, InfiniOps' own reading
//   of torch.bool, its Python binding's) to an ATen-backed implementation:
//   a bool output where ATen's kernel takes uint8 for it (tried once per
//   overload), as ATen writes a bool result into uint8 as the bytes 0 and 1
//   a bool has; a bool operand where ATen computes the same on its bytes
//   (runtime/bool_operands.h: a reviewed table, and a promotion rule); and
//   a complex tensor is passed as pairs of its real dtype where ATen's
//   kernel only moves whole elements (runtime/complex_pairs.h: a reviewed
//   table; the call's other arguments follow the pairs' new dimension);
// - a CPU scalar operand PyTorch would not read as exactly the output's
//   dtype (InfiniOps reads device memory only: it gets a device copy);
// - a Scalar InfiniOps' double would change: beyond 2^53, or an integer
//   where the call computes in an integer dtype (ATen computes integer
//   arithmetic with an integer Scalar, and refuses a floating one there);
// - an argument its API leaves out (layout, device, memory format) that is
//   not None;
// - an implementation index the build lacks: never asked for.
// Native implementations have limits of their own; without a hand-written
// entry for them (infini_kernels.cpp's servers) a native one is used only
// for one floating dtype and contiguous tensors that do not overlap.

#include "runtime/infini/infini_binding.h"

#include <ATen/core/LegacyTypeDispatch.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/zeros.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "runtime/bool_operands.h"
#include "runtime/cache_verification.h"
#include "runtime/complex_pairs.h"
#include "runtime/dispatch_state.h"
#include "runtime/infini/device_scalars.h"
#include "runtime/infini/profiler_guard.h"
#include "runtime/ivalue_tensors.h"

namespace torch_infini::runtime::infini {
namespace binding_detail {

void append_key(OperatorKey& key, const c10::IValue& v) {
  auto& w = key.words;
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    w.push_back(t.defined() ? static_cast<int64_t>(t.scalar_type()) : -1);
    if (t.defined()) {
      w.push_back(t.dim());
      w.append(t.sizes().begin(), t.sizes().end());
      w.append(t.strides().begin(), t.strides().end());
    }
  } else if (v.isTensorList()) {
    w.push_back(-2);
    for (const at::Tensor& t : v.toTensorList()) {
      append_key(key, t);
    }
  } else if (v.isList()) {
    w.push_back(-3);
    w.push_back(static_cast<int64_t>(v.toListRef().size()));
    for (const c10::IValue& e : v.toListRef()) {
      append_key(key, e);
    }
  } else if (v.isNone()) {
    w.push_back(-4);
  } else if (v.isDouble()) {
    int64_t bits = 0;
    const double d = v.toDouble();
    std::memcpy(&bits, &d, sizeof(bits));
    w.push_back(bits);
  } else if (v.isInt() || v.isBool()) {
    w.push_back(v.isInt() ? v.toInt() : v.toBool());
  } else if (v.isScalar()) {
    append_key(key, v.toScalar().isFloatingPoint()
                        ? c10::IValue(v.toScalar().toDouble())
                        : c10::IValue(v.toScalar().toLong()));
  } else if (v.isString()) {
    w.push_back(static_cast<int64_t>(std::hash<std::string>()(v.toStringRef())));
  } else {
    w.push_back(static_cast<int64_t>(std::hash<std::string>()(v.tagKind())));
  }
}

bool serial(const Launch& l) {
  // ATen's kernels (the ATen-backed implementation) go parallel only above
  // their grain size, as in CPU eager; forcing them serial by the output's
  // size would run a reduction of many elements to few on one thread.
  if (l.provider->device_type() != irt::Device::Type::kCpu ||
      l.implementation == kAtenBackedIndex) {
    return false;
  }
  for (const auto& c : *l.conversions) {
    const c10::IValue& v = (*l.args)[c.aten_index];
    if (c.output && v.isTensor() && v.toTensor().defined()) {
      return v.toTensor().numel() < kSerialBelowElements;
    }
  }
  return false;
}

}  // namespace binding_detail

void refuse_skipped_overload(const char* op) {
  TORCH_CHECK(false, "infini: InfiniOps' ATen-backed ", op,
              " has no implementation of this overload (its generator "
              "skipped it); the binding table never calls it");
}

namespace {

bool mappable(c10::ScalarType t) {
  irt::DataType unused;
  return to_infini_dtype(t, &unused);
}

bool is_floating(c10::ScalarType t) {
  return t == c10::ScalarType::Float || t == c10::ScalarType::Half ||
      t == c10::ScalarType::BFloat16 || t == c10::ScalarType::Double;
}

// Calls `f(tensor, conversion)` for every tensor a conversion reads.
template <typename F>
void each_tensor(const Binding& b, const std::vector<c10::IValue>& args, F f) {
  for (const auto& c : b.conversions) {
    const c10::IValue& v = args[c.aten_index];
    if (v.isTensor()) {
      f(v.toTensor(), c);
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) {
        f(t, c);
      }
    } else if (v.isList()) {
      for (const c10::IValue& e : v.toListRef()) {
        if (e.isTensor()) {
          f(e.toTensor(), c);
        }
      }
    }
  }
}

std::string arg_name(const AtenCall& call, int index) {
  const auto& arguments = call.op.schema().arguments();
  return static_cast<size_t>(index) < arguments.size()
      ? arguments[index].name()
      : "result " + std::to_string(index - arguments.size());
}

// The call with the results the ops layer allocated appended to its
// arguments: a functional binding writes result k as argument nargs + k.
const AtenCall& with_results(const AtenCall& call,
                             std::optional<AtenCall>* storage) {
  if (call.results_into.empty()) {
    return call;
  }
  storage->emplace(call);
  for (const at::Tensor& r : call.results_into) {
    (*storage)->args.push_back(r);
  }
  return **storage;
}

// Why the call's complex tensors cannot reach `b` as pairs of their real
// dtype (runtime/complex_pairs.h); empty when they can, or when it has none.
std::string complex_reason(const Binding& b, const AtenCall& call) {
  if (!has_complex_tensor(call.args)) {
    return {};
  }
  c10::ScalarType complex = c10::ScalarType::Undefined;
  bool on_cpu = false;
  for (const c10::IValue& v : call.args) {
    map_tensors(v, [&](const at::Tensor& t) {
      if (t.defined() && t.is_complex()) {
        complex = complex == c10::ScalarType::Undefined ? t.scalar_type() : complex;
        on_cpu = on_cpu || t.device().is_cpu();
      }
      return t;
    });
  }
  std::string why = complex_pairs_reason(call.op.schema(), call.args);
  if (why.empty() && on_cpu) {
    why = "a complex operand is a CPU scalar, whose device copy would need "
        "that DataType";
  }
  if (why.empty()) {
    return {};
  }
  return "infini::ops::" + b.op + " has no " + dtype_name(complex) +
      " tensors (" + missing_datatype(complex) + "): a complex tensor reaches "
      "InfiniOps as pairs of its real dtype only where ATen computes the same "
      "on them, and " + why;
}

// The call with its complex tensors as pairs of their real dtype, the other
// arguments following (complex_reason accepted it); the call itself when it
// has none.
const AtenCall& as_pairs(const AtenCall& call, std::optional<AtenCall>* storage) {
  if (!has_complex_tensor(call.args)) {
    return call;
  }
  storage->emplace(call);
  (*storage)->args = complex_as_pairs(call.op.schema(), call.args);
  return **storage;
}

// The dtype the call computes in: its first output's, or for a bool output
// (a comparison) its first device input's.
c10::ScalarType compute_dtype(const Binding& b, const AtenCall& call) {
  c10::ScalarType out = c10::ScalarType::Undefined;
  for (const auto& c : b.conversions) {
    if (c.output && call.args[c.aten_index].isTensor()) {
      out = call.args[c.aten_index].toTensor().scalar_type();
      break;
    }
  }
  if (out != c10::ScalarType::Bool) {
    return out;
  }
  for (const auto& c : b.conversions) {
    const c10::IValue& v = call.args[c.aten_index];
    if (!c.output && v.isTensor() && v.toTensor().defined() &&
        !v.toTensor().device().is_cpu()) {
      return v.toTensor().scalar_type();
    }
  }
  return out;
}

// Whether every device tensor the call reads is of the output's kind
// (floating or not).
bool device_operands_of_kind(const Binding& b, const AtenCall& call,
                             c10::ScalarType out) {
  bool same = true;
  each_tensor(b, call.args, [&](const at::Tensor& t, const ArgConversion& c) {
    same = same && (c.output || !t.defined() || t.device().is_cpu() ||
                    is_floating(t.scalar_type()) == is_floating(out));
  });
  return same;
}

// The dtype a CPU scalar operand `s` is copied to the device as: the
// output's for a native implementation (which reads every operand as it);
// for the ATen-backed one its own where it and every device operand are of
// the output's kind (a 0-dim operand never promotes within its kind, so ATen
// computes as with the CPU scalar), else the output's: a double beside an
// integer tensor would make ATen compute in double, where CPU's wrapped
// number computes in the output's dtype (int * 1e39: 0 * inf is nan, not
// 0). Undefined where that copy would not be exact.
c10::ScalarType scalar_dtype(const at::Tensor& s, c10::ScalarType out,
                             bool aten_backed, bool operands_of_kind) {
  if (aten_backed && operands_of_kind && mappable(s.scalar_type()) &&
      is_floating(s.scalar_type()) == is_floating(out)) {
    return s.scalar_type();
  }
  return scalar_exact(s, out) ? out : c10::ScalarType::Undefined;
}

std::string cpu_scalar_reason(const Binding& b, const AtenCall& call,
                              bool aten_backed) {
  const c10::ScalarType out = compute_dtype(b, call);
  const bool of_kind = device_operands_of_kind(b, call, out);
  std::string reason;
  each_tensor(b, call.args, [&](const at::Tensor& t, const ArgConversion& c) {
    if (reason.empty() && t.defined() && t.device().is_cpu() && !c.output &&
        scalar_dtype(t, out, aten_backed, of_kind) ==
            c10::ScalarType::Undefined) {
      reason = "infini::ops::" + b.op + " reads operands from device memory, "
          "and the CPU scalar operand is not exactly representable in the "
          "dtype the call computes in, " + dtype_name(out) + " (PyTorch computes with it "
          "in float32)";
    }
  });
  return reason;
}

// Drops warnings (a probe's).
class DropWarnings final : public c10::WarningHandler {
 public:
  void process(const c10::Warning&) override {}
};

// Runs ATen's CPU kernel of `call.op` on `cpu` (CPU stand-ins for the call's
// arguments), warnings dropped: the error it raised, if any.
std::optional<std::string> error_on_cpu(const AtenCall& call,
                                        torch::jit::Stack* cpu) {
  try {
    DropWarnings drop;
    c10::WarningUtils::WarningHandlerGuard quiet(&drop);
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    call.op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), cpu);
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// The verification mode's check of a cached try's answer
// (runtime/cache_verification.h): the try made again must agree.
struct CachedTry {
  bool answer;
  DispatchState state;  // what it was tried under (in the key)
};
using CachedTries = std::unordered_map<OperatorKey, CachedTry, OperatorKeyHash>;

template <typename Try>
void verify_binding_try(const char* cache, const AtenCall& call,
                        const CachedTry& cached, Try&& try_again) {
  if (!verify_caches()) {
    return;
  }
  if (try_again() != cached.answer) {
    raise_stale_cache(cache, c10::toString(call.op.operator_name()),
                      std::string("cached ") + (cached.answer ? "yes" : "no") +
                          ", tried again " + (cached.answer ? "no" : "yes"),
                      cached.state);
  }
  count_verified_hit(cache);
}

// Whether ATen's kernel of `call.op` accepts uint8 tensors in place of its
// bool outputs: most do (comparisons, logical_*, all/any), a few insist on
// bool (isneginf, isposinf). Tried once per thread, overload, its tensors'
// dtypes and ranks and the state ATen's checks read
// (runtime/dispatch_state.h), on CPU zeros laid out as the call's tensors;
// a functional overload (its results appended to its arguments) cannot be
// tried and is not.
bool takes_uint8_for_bool(const AtenCall& call) {
  if (!call.results_into.empty()) {
    return false;
  }
  const DispatchState state = DispatchState::current();
  OperatorKey key;
  key.words.push_back(reinterpret_cast<intptr_t>(&call.op.schema()));
  for (const c10::IValue& value : call.args) {
    map_tensors(value, [&key](const at::Tensor& t) {
      key.words.push_back(t.defined() ? static_cast<int64_t>(t.scalar_type())
                                      : -1);
      key.words.push_back(t.defined() ? t.dim() : -1);
      return t;
    });
  }
  append_state(key, state);
  const auto try_on_cpu = [&call] {
    torch::jit::Stack cpu;
    for (const c10::IValue& value : call.args) {
      cpu.push_back(map_tensors(value, [](const at::Tensor& t) {
        if (!t.defined() || t.device().is_cpu()) {
          return t;
        }
        const c10::ScalarType dtype = t.scalar_type() == c10::ScalarType::Bool
            ? c10::ScalarType::Byte
            : t.scalar_type();
        return at::zeros(t.sizes(),
                         t.options().device(at::kCPU).dtype(dtype));
      }));
    }
    return !error_on_cpu(call, &cpu).has_value();
  };
  thread_local CachedTries known;
  const auto it = known.find(key);
  if (it != known.end()) {
    verify_binding_try("bool outputs as uint8", call, it->second, try_on_cpu);
    return it->second.answer;
  }
  const bool accepted = try_on_cpu();
  if (known.size() >= 1024) {
    known.clear();  // bounded, as the operator caches are
  }
  known.emplace(std::move(key), CachedTry{accepted, state});
  return accepted;
}

// Whether ATen's kernel of `call.op` (an out= overload) resizes an output in
// passing: mse_loss.out and the other reducing losses compute the
// elementwise loss into `out`, then reduce it into `out`. InfiniOps'
// ATen-backed implementation hands ATen outputs over fixed device memory,
// which cannot be resized, so such a call fails ("Trying to resize storage
// that is not resizable"). Tried once per thread, overload, tensor ranks and
// the arguments that choose a kernel's path (int, bool, str, dtype values:
// reduction; not Scalar or float values, which vary from call to call), on
// CPU zeros laid out as the call's inputs and outputs over fixed memory; a
// try that fails otherwise (values zeros cannot take) says nothing and is
// taken as no. Every ATen-backed call asks: the key is a few words on the
// stack and the cache is the thread's own, so no lock and no allocation.
// The key holds each tensor's sizes and its storage's size, not only its
// rank: whether the kernel's scratch fits the output depends on them
// (binary_cross_entropy.out of one element fits its 0-dim output, of five
// it does not; keyed by ranks, the first answer was taken for the second).
bool resizes_outputs_in_passing(const AtenCall& call) {
  if (!call.results_into.empty()) {
    return false;
  }
  const auto& schema = call.op.schema().arguments();
  OperatorKey key;
  key.words.push_back(reinterpret_cast<intptr_t>(&call.op.schema()));
  for (size_t i = 0; i < call.args.size(); ++i) {
    const c10::IValue& v = call.args[i];
    if (v.isTensor()) {
      const at::Tensor& t = v.toTensor();
      key.words.push_back(t.defined() ? t.dim() : -1);
      if (t.defined()) {
        for (const int64_t size : t.sizes()) {
          key.words.push_back(size);
        }
        key.words.push_back(t.has_storage()
                                ? static_cast<intptr_t>(t.storage().nbytes())
                                : -1);
      }
    } else if (v.isInt() || v.isBool() || v.isString() || v.isNone()) {
      const c10::Type* type = i < schema.size() ? schema[i].type().get() : nullptr;
      if (type != nullptr && type->kind() == c10::TypeKind::OptionalType) {
        type = type->castRaw<c10::OptionalType>()->getElementType().get();
      }
      if (type != nullptr && type->kind() == c10::TypeKind::NumberType) {
        key.words.push_back(-5);  // a Scalar's value: not part of the key
      } else {
        binding_detail::append_key(key, v);
      }
    } else {
      key.words.push_back(-5);  // lists, doubles, Scalars: their kind only
    }
  }
  const DispatchState state = DispatchState::current();
  append_state(key, state);
  const auto try_on_cpu = [&call, &schema] {
    std::vector<at::Tensor> fixed;  // the outputs' memory, alive for the try
    torch::jit::Stack cpu;
    for (size_t i = 0; i < call.args.size(); ++i) {
      const bool output = i < schema.size() && schema[i].alias_info() &&
          schema[i].alias_info()->isWrite();
      cpu.push_back(map_tensors(call.args[i], [&](const at::Tensor& t) {
        if (!t.defined() || t.device().is_cpu()) {
          return t;
        }
        const auto options = t.options().device(at::kCPU);
        if (!output) {
          return at::zeros(t.sizes(), options);
        }
        fixed.push_back(at::zeros({static_cast<int64_t>(
                                      t.storage().nbytes() / t.itemsize() + 1)},
                                  options));
        return at::from_blob(fixed.back().data_ptr(), t.sizes(), t.strides(),
                             options);
      }));
    }
    const std::optional<std::string> error = error_on_cpu(call, &cpu);
    return error.has_value() &&
        error->find("not resizable") != std::string::npos;
  };
  thread_local CachedTries known;
  const auto it = known.find(key);
  if (it != known.end()) {
    verify_binding_try("outputs resized in passing", call, it->second,
                       try_on_cpu);
    return it->second.answer;
  }
  const bool resizes = try_on_cpu();
  if (known.size() >= 1024) {
    known.clear();  // bounded, as the operator caches are
  }
  known.emplace(std::move(key), CachedTry{resizes, state});
  return resizes;
}

// What every implementation needs; empty when the call converts.
// `inexpressible` is set where the reason is that InfiniOps' API cannot
// express an argument (a Scalar it takes as a double: an integer one for
// integer tensors, a complex one, one beyond 2^53; a bool operand ATen
// would compute otherwise on its bytes; a result ATen writes as bool only),
// which no implementation can then take whatever its rounding: PyTorch's
// decomposition may serve the call.
std::string common_reason(const Binding& b, const AtenCall& call,
                          bool* inexpressible) {
  const std::string kernel = "infini::ops::" + b.op;
  for (int i : b.must_be_none) {
    if (!call.args[i].isNone()) {
      return kernel + " has no argument '" + arg_name(call, i) +
          "' (its API leaves it out): only None is served";
    }
  }
  std::string reason;
  bool bool_output = false;
  bool bool_operands_checked = false;
  each_tensor(b, call.args, [&](const at::Tensor& t, const ArgConversion& c) {
    if (!reason.empty()) {
      return;
    }
    if (!t.defined()) {
      if (c.kind == ArgKind::kTensor || c.kind == ArgKind::kTensorList) {
        reason = kernel + " needs every tensor argument defined";
      }
      return;
    }
    const bool is_bool = t.scalar_type() == c10::ScalarType::Bool;
    bool_output = bool_output || (is_bool && c.output);
    if (is_bool && !c.output) {
      // Read as its bytes where ATen computes the same on them; otherwise
      // no implementation can take it. The rule covers the whole call:
      // asked at its first bool operand only.
      if (bool_operands_checked) {
        return;
      }
      bool_operands_checked = true;
      const std::string bytes = bool_operands_reason(call.op.schema(), call.args);
      if (!bytes.empty()) {
        reason = kernel + " has no bool tensors (InfiniRT has no bool "
            "DataType): a bool operand reaches it as its bytes (uint8), and " +
            bytes;
        *inexpressible = true;
      }
      return;
    }
    if (!mappable(t.scalar_type()) && !is_bool) {
      reason = kernel + " has no " + dtype_name(t.scalar_type()) +
          " tensors (" + missing_datatype(t.scalar_type()) + ")";
      return;
    }
    if (t.device().is_cpu() && c.output) {
      reason = kernel + " writes device memory only, not a CPU tensor";
    }
  });
  if (!reason.empty()) {
    return reason;
  }
  if (bool_output && !takes_uint8_for_bool(call)) {
    *inexpressible = true;  // no implementation can write it
    return kernel + " has no bool tensors (InfiniRT has no bool DataType), "
        "and ATen's " + c10::toString(call.op.operator_name()) +
        " writes its result as bool only";
  }
  for (const auto& c : b.conversions) {
    const c10::IValue& v = call.args[c.aten_index];
    if ((c.kind == ArgKind::kScalar || c.kind == ArgKind::kOptionalScalar) &&
        !v.isNone()) {
      const c10::Scalar s = v.toScalar();
      *inexpressible = true;  // unless it converts, below
      if (s.isComplex()) {
        return kernel + " takes '" + arg_name(call, c.aten_index) +
            "' as a double: a complex value is not served";
      }
      if (!s.isFloatingPoint()) {
        if (!is_floating(compute_dtype(b, call))) {
          return kernel + " takes '" + arg_name(call, c.aten_index) +
              "' as a double, and ATen computes integer tensors with an "
              "integer scalar (and refuses a floating one)";
        }
        if (std::abs(s.toLong()) > (int64_t{1} << 53)) {
          return kernel + " takes '" + arg_name(call, c.aten_index) +
              "' as a double, which does not represent " +
              std::to_string(s.toLong()) + " exactly";
        }
      }
      *inexpressible = false;
    }
    if ((c.kind == ArgKind::kDataType || c.kind == ArgKind::kOptionalDataType) &&
        !v.isNone() && !mappable(v.toScalarType())) {
      return kernel + " takes no " + dtype_name(v.toScalarType()) + " dtype (" +
          missing_datatype(v.toScalarType()) + ")";
    }
    if (c.kind == ArgKind::kTensorList && v.isTensorList() &&
        v.toTensorList().empty()) {
      return kernel + " needs a non-empty tensor list";
    }
  }
  return {};
}

// The generic limits of a native implementation without an entry in
// infini_native.cpp: one floating dtype, contiguous device tensors, no
// overlaps.
std::string generic_native_reason(const Binding& b, const AtenCall& call) {
  // Named only in a refusal: built per call, it cost a heap allocation.
  const auto kernel = [&b] { return "infini::ops::" + b.op + " (native)"; };
  std::optional<c10::ScalarType> dtype;
  std::string reason;
  c10::SmallVector<TensorArg, 2> inputs, outputs;
  each_tensor(b, call.args, [&](const at::Tensor& t, const ArgConversion& c) {
    if (!reason.empty() || !t.defined()) {
      return;
    }
    dtype = dtype.value_or(t.scalar_type());
    if (t.scalar_type() != *dtype || !is_floating(*dtype) ||
        *dtype == c10::ScalarType::Double) {
      reason = kernel() + " is served for one dtype of float32, float16 or "
          "bfloat16";
    } else if (t.device().is_cpu() || !t.is_contiguous()) {
      reason = kernel() + " is served for contiguous device tensors";
    } else {
      (c.output ? outputs : inputs).push_back(arg_of(t));
    }
  });
  if (!reason.empty()) {
    return reason;
  }
  for (const auto& out : outputs) {
    for (const auto& in : inputs) {
      if (may_overlap(out, in)) {
        return kernel() + " is served for outputs that overlap no input";
      }
    }
  }
  return {};
}

std::string native_reason(const Binding& b, const AtenCall& call) {
  std::string reason = cpu_scalar_reason(b, call, /*aten_backed=*/false);
  if (!reason.empty()) {
    return reason;
  }
  const NativeLimits* limits = native_limits(b.op);
  return limits != nullptr ? limits->check(b, call)
                           : generic_native_reason(b, call);
}

// The element count of the first output `b` writes in `call` (an argument,
// or a result the ops layer allocated; 0 if none).
int64_t output_numel(const Binding& b, const AtenCall& call) {
  const size_t nargs = call.args.size();
  for (const auto& c : b.conversions) {
    const size_t i = static_cast<size_t>(c.aten_index);
    if (!c.output) {
      continue;
    }
    if (i < nargs && call.args[i].isTensor() &&
        call.args[i].toTensor().defined()) {
      return call.args[i].toTensor().numel();
    }
    if (i >= nargs && i - nargs < call.results_into.size()) {
      return call.results_into[i - nargs].numel();
    }
  }
  return 0;
}

// The native kernels that find every element's place axis by axis (a
// division and a remainder per axis), whatever the layout, where the others
// walk contiguous tensors by a flat index: their time per element grows
// with the rank, and benchmarks/implementations.py measures them on 1-D
// tensors, so only a 1-D call has the measured form. InfiniOps' native Cat
// took 115 K instructions, 10.9 us, for a transformer's key cache
// ([2, 2, 12, 16] along dim -2, 768 elements: "native" by its size class),
// where ATen-backed took 6 us.
bool indexes_axis_by_axis(const std::string& op) {
  return op == "Cat";
}

// Whether `call` has the form implementation speeds were measured in
// (runtime/implementation_preferences.h): contiguous device tensors, and
// where the native kernel broadcasts its inputs, inputs of the output's
// size or of one element (a CPU scalar is copied as one). Measured on the
// CPU backend, [2, 12, 32] * [2, 12, 1] (a normalization's scale) took
// 9.95 us native and 5.60 ATen-backed, a transposed input 12.35 and 6.43,
// where the measured form of the same size took 4.47 and 5.73.
bool in_measured_form(const Binding& b, const AtenCall& call) {
  const NativeLimits* limits = native_limits(b.op);
  const bool broadcasts = limits != nullptr && limits->broadcast_inputs;
  const bool measured_in_1d = indexes_axis_by_axis(b.op);
  const int64_t out_numel = output_numel(b, call);
  bool measured = true;
  each_tensor(b, call.args, [&](const at::Tensor& t, const ArgConversion& c) {
    if (!measured || !t.defined() || t.device().is_cpu()) {
      return;
    }
    const int64_t numel = t.numel();
    measured = (numel <= 1 || t.is_contiguous()) &&
        (!broadcasts || c.output || numel <= 1 || numel == out_numel) &&
        (!measured_in_1d || t.dim() <= 1);
  });
  return measured;
}

}  // namespace

size_t hand_written_index(const InfiniProvider& provider, const char* op,
                          int aten_index, int64_t numel, c10::ScalarType dtype,
                          bool aten_when_unmeasured, bool measured_form) {
  const int type = static_cast<int>(provider.device_type());
  if (!has_implementation_index(operator_implementations(op), type,
                                aten_index)) {
    return 0;
  }
  const ImplementationKind faster =
      preferences_for(provider.backend())
          .faster(op, numel, static_cast<int>(dtype), measured_form);
  const bool aten = faster == ImplementationKind::kUnknown
      ? aten_when_unmeasured
      : faster == ImplementationKind::kAtenBacked;
  return aten ? static_cast<size_t>(aten_index) : 0;
}

bool in_measured_form(std::initializer_list<const TensorArg*> operands) {
  return std::all_of(operands.begin(), operands.end(), [](const TensorArg* t) {
    return is_contiguous(*t) ||
        std::all_of(t->strides.begin(), t->strides.end(),
                    [](int64_t stride) { return stride == 0; });
  });
}

ImplementationKind GenericServer::faster(const Binding& b,
                                         const AtenCall& call) const {
  return preferences_for(provider_.backend())
      .faster(b.op, output_numel(b, call),
              static_cast<int>(compute_dtype(b, call)),
              in_measured_form(b, call));
}

GenericServer::GenericServer(InfiniProvider& provider) : provider_(provider) {
  for (const Binding& b : generated_bindings()) {
    by_overload_.emplace(b.aten, &b);
  }
}

const Binding* GenericServer::find(const std::string& overload) const {
  const auto it = by_overload_.find(overload);
  return it == by_overload_.end() ? nullptr : it->second;
}

bool GenericServer::has_kernel(const Binding& b) const {
  const int type = static_cast<int>(provider_.device_type());
  return native_index(b.implementations, type) >= 0 ||
      has_implementation_index(b.implementations, type, kAtenBackedIndex);
}

std::string GenericServer::choose(const Binding& b, const AtenCall& given,
                                  bool native_allowed, int* implementation,
                                  bool* cannot_take) const {
  std::optional<AtenCall> storage;
  const AtenCall& whole = with_results(given, &storage);
  if (!has_kernel(b)) {
    return "InfiniOps has no " + b.op + " implementation for " +
        provider_.backend() + " in this build";
  }
  // As every dtype InfiniRT has no DataType for, a complex call refused
  // here is not handed to PyTorch's decomposition: its parts are complex too
  // (conj_physical's decomposition calls conj_physical.out again).
  const std::string complex = complex_reason(b, whole);
  if (!complex.empty()) {
    return complex;
  }
  std::optional<AtenCall> paired;
  const AtenCall& call = as_pairs(whole, &paired);
  const int type = static_cast<int>(provider_.device_type());
  bool inexpressible = false;
  const std::string common = common_reason(b, call, &inexpressible);
  if (!common.empty()) {
    if (cannot_take != nullptr) {
      *cannot_take = inexpressible;
    }
    return common;
  }
  // Bool operands are read as their bytes by ATen only (common_reason
  // checked that it computes the same on them); a native kernel would read
  // uint8.
  const bool bool_operands = has_bool_operand(call.op.schema(), call.args);
  if (bool_operands && !has_implementation_index(b.implementations, type,
                                                 kAtenBackedIndex)) {
    if (cannot_take != nullptr) {
      *cannot_take = true;
    }
    return "infini::ops::" + b.op + " takes bool operands (as their bytes) "
        "only in its ATen-backed implementation, which this build lacks "
        "(InfiniOps built WITH_TORCH=ON has one)";
  }
  std::string native_limit;
  std::string aten_limit;
  *implementation = choose_implementation(
      b.implementations, type, native_allowed && !bool_operands,
      faster(b, call),
      [&] {
        native_limit = native_reason(b, call);
        return native_limit.empty();
      },
      [&] {
        aten_limit = cpu_scalar_reason(b, call, /*aten_backed=*/true);
        if (aten_limit.empty() && resizes_outputs_in_passing(call)) {
          aten_limit = "ATen's " + c10::toString(call.op.operator_name()) +
              " resizes its output in passing (it computes into it, then "
              "reduces into it), and the ATen-backed infini::ops::" + b.op +
              " hands ATen outputs over fixed device memory";
          if (cannot_take != nullptr) {
            *cannot_take = native_index(b.implementations, type) < 0;
          }
        }
        return aten_limit.empty();
      });
  if (*implementation >= 0) {
    return {};
  }
  if (!aten_limit.empty()) {
    return aten_limit;
  }
  if (!native_allowed) {
    return "this build has no ATen-backed infini::ops::" + b.op +
        " (InfiniOps built WITH_TORCH=ON has one) for the calls its native "
        "implementation does not serve";
  }
  return native_limit + " (this build has no ATen-backed " + b.op +
      ": InfiniOps built WITH_TORCH=ON has one)";
}

void GenericServer::run(const Binding& b, int device, StreamHandle stream,
                        const AtenCall& given, int implementation) {
  std::optional<AtenCall> storage;
  std::optional<AtenCall> paired;
  const AtenCall& call = as_pairs(with_results(given, &storage), &paired);
  TORCH_CHECK(has_implementation_index(b.implementations,
                                       static_cast<int>(provider_.device_type()),
                                       implementation),
              "infini: InfiniOps has no implementation ", implementation,
              " of ", b.op, " in this build");
  std::vector<c10::IValue> args(call.args.begin(), call.args.end());
  const bool aten_backed = implementation == kAtenBackedIndex;
  const c10::ScalarType out_dtype = compute_dtype(b, call);
  const bool of_kind = device_operands_of_kind(b, call, out_dtype);
  c10::DataPtr owned[4];
  size_t next_owned = 0;
  at::Tensor out;
  for (const auto& c : b.conversions) {
    c10::IValue& v = args[c.aten_index];
    if (c.output && v.isTensor() && !out.defined()) {
      out = v.toTensor();
    }
    if (c.output || !v.isTensor() || !v.toTensor().defined() ||
        !v.toTensor().device().is_cpu()) {
      continue;
    }
    // A CPU scalar: its cached device copy (checked exact by choose).
    const c10::ScalarType dtype =
        scalar_dtype(v.toTensor(), out_dtype, aten_backed, of_kind);
    c10::DataPtr spare;
    void* data = DeviceScalars::instance().get(provider_, device, stream,
                                               v.toTensor(), dtype, &spare);
    if (spare && next_owned < 4) {
      owned[next_owned++] = std::move(spare);
    }
    v = at::from_blob(data, {}, at::TensorOptions().dtype(dtype).device(
                                    c10::Device(c10::DeviceType::PrivateUse1,
                                                static_cast<c10::DeviceIndex>(device))));
  }
  const NativeLimits* limits = aten_backed ? nullptr : native_limits(b.op);
  const bool broadcast = limits != nullptr && limits->broadcast_inputs;
  const Launch launch{&provider_, device, stream, implementation, &args,
                      &b.conversions,
                      broadcast ? out.sizes() : c10::IntArrayRef()};
  const OneCallInProfiles one_call_in_profiles;
  // A bool operand reaches ATen as uint8, for which `where` warns that a
  // uint8 condition is deprecated: the program gave a bool one, and CPU
  // PyTorch says nothing.
  std::optional<DropWarnings> drop;
  std::optional<c10::WarningUtils::WarningHandlerGuard> quiet;
  if (aten_backed && has_bool_operand(call.op.schema(), call.args)) {
    drop.emplace();
    quiet.emplace(&*drop);
  }
  b.launch(launch);
}

std::string implementation_label(int index) {
  return index == kAtenBackedIndex ? "ATen-backed" : "native";
}

}  // namespace torch_infini::runtime::infini
