#include "runtime/layout_cache.h"

#include <ATen/core/Formatting.h>

#include <array>
#include <cfloat>
#include <cmath>
#include <sstream>
#include <string>
#include <unordered_map>

#include "runtime/cache_key_bytes.h"
#include "runtime/cache_verification.h"

namespace torch_infini::runtime {
namespace {

// A tensor by device, dtype, sizes and strides (a CPU scalar by dtype and
// wrapped-number flag: its value is read where the kernel runs).
void append_tensor(std::string& key, const at::Tensor& t) {
  key.push_back(!t.defined() ? 'u' : t.device().is_cpu() ? 'c' : 't');
  if (!t.defined()) {
    return;
  }
  const auto dtype = t.scalar_type();
  append_bytes(key, &dtype, sizeof(dtype));
  if (t.device().is_cpu()) {
    key.push_back(t.unsafeGetTensorImpl()->is_wrapped_number() ? 'w' : 'n');
    return;
  }
  const int64_t dim = t.dim();
  append_bytes(key, &dim, sizeof(dim));
  append_bytes(key, t.sizes().data(), dim * sizeof(int64_t));
  append_bytes(key, t.strides().data(), dim * sizeof(int64_t));
  key.push_back(static_cast<char>(t.is_conj() | (t.is_neg() << 1) |
                                  (t._is_zerotensor() << 2)));
  const auto index = t.device().index();
  append_bytes(key, &index, sizeof(index));
}

// The class of a floating-point argument's value, for calls whose outputs
// are inputs they write in place (see writes_only_inputs): what CPU
// kernels check of such a value, and nothing more, so that x.addcdiv_(a, b,
// value=v) with a new step size every optimizer step is queued, not run
// directly each time. The classes: NaN, each infinity, each zero, and
// otherwise the sign, whether it is integral, and where its magnitude
// falls against 1 and the limits of converting it to each dtype (int8 to
// float, bfloat16 and half): a value a conversion would refuse (300 into
// uint8) or a range check would (a probability above 1, a negative norm)
// is keyed apart from one it would take.
uint8_t value_class(double v) {
  if (std::isnan(v)) {
    return 0;
  }
  if (std::isinf(v)) {
    return v > 0 ? 1 : 2;
  }
  if (v == 0) {
    return std::signbit(v) ? 4 : 3;
  }
  static constexpr std::array<double, 18> limits = {
      1.0,          127.0,        128.0,         255.0,
      256.0,        32767.0,      32768.0,       65504.0,  // half's max
      65535.0,      65536.0,      2147483647.0,  2147483648.0,
      4294967295.0, 4294967296.0, 9.2233720368547758e18,
      1.8446744073709552e19,      3.3895313892515355e38,  // bfloat16's max
      FLT_MAX};
  const double magnitude = std::fabs(v);
  size_t bucket = 2 * limits.size();
  for (size_t i = 0; i < limits.size(); ++i) {
    if (magnitude <= limits[i]) {
      bucket = 2 * i + (magnitude == limits[i] ? 1 : 0);
      break;
    }
  }
  return static_cast<uint8_t>(8 + 4 * bucket + (v < 0 ? 2 : 0) +
                              (v == std::trunc(v) ? 1 : 0));
}

// Top-level floating-point arguments keyed by class (value_class): their
// classes, and how each compares with the others (min <= max).
struct ValueClasses {
  bool active = false;
  std::array<double, 8> values{};
  size_t count = 0;

  // False where the value is to be keyed exactly.
  bool append(std::string& key, double v) {
    if (!active || count == values.size()) {
      return false;
    }
    values[count++] = v;
    key.push_back('f');
    key.push_back(static_cast<char>(value_class(v)));
    return true;
  }

  void append_order(std::string& key) const {
    for (size_t i = 0; i < count; ++i) {
      for (size_t j = i + 1; j < count; ++j) {
        key.push_back(values[i] < values[j] ? '<'
                          : values[i] == values[j] ? '=' : '>');
      }
    }
  }
};

// Whether the call's outputs are all inputs it writes (in place, or an
// out= that is one of its inputs): their layouts are those inputs', which
// no floating-point value changes (a call that would resize one runs
// directly; see keeps_layouts in aten_kernel.cpp).
bool writes_only_inputs(const Plan& plan, SameArguments same) {
  if (!plan.returns_only_written) {
    return false;
  }
  for (size_t k = 0; k < plan.written.size(); ++k) {
    if (plan.written_out[k] && (k >= 4 || ((same >> (16 * k)) & 0xffff) == 0)) {
      return false;
    }
  }
  return true;
}

// What the outputs' metadata depends on: every argument's metadata and
// value. False where an argument is of a kind not keyed (a Generator).
bool append_key(std::string& key, const c10::IValue& value) {
  if (value.isTensor()) {
    append_tensor(key, value.toTensor());
  } else if (value.isTensorList()) {
    key.push_back('L');
    for (const at::Tensor& t : value.toTensorList()) {
      append_tensor(key, t);
    }
    key.push_back(';');
  } else if (value.isList()) {  // int[], float[], bool[], Tensor?[], ...
    key.push_back('[');
    for (const c10::IValue& element : value.toListRef()) {
      if (!append_key(key, element)) {
        return false;
      }
    }
    key.push_back(']');
  } else {
    return append_plain_value(key, value);
  }
  return true;
}

// What the key leaves out of a call on purpose, for the verification
// mode's message: the storage offsets of device tensors (no CPU kernel lays
// its outputs out by them), the values of CPU scalars (read where the
// kernel runs) and the exact floating values keyed by class.
std::string unkeyed_of(c10::ArrayRef<c10::IValue> args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    const c10::IValue& value = args[i];
    if (value.isDouble()) {
      out += "arg " + std::to_string(i) + " = " +
          std::to_string(value.toDouble()) + "; ";
    }
  }
  for_each_tensor(args, [&out](const at::Tensor& t, size_t i) {
    if (!t.defined()) {
      return;
    }
    if (t.device().is_cpu() && t.dim() == 0) {
      std::ostringstream value;
      value << t.item();
      out += "arg " + std::to_string(i) + " (CPU scalar) = " + value.str() +
          "; ";
    } else if (!t.device().is_cpu()) {
      out += "arg " + std::to_string(i) + " storage offset " +
          std::to_string(t.storage_offset()) + "; ";
    }
  });
  return out;
}

std::string layout_text(const Layout& layout) {
  if (!layout.defined) {
    return "undefined";
  }
  std::ostringstream out;
  out << c10::toString(layout.dtype) << " sizes "
      << c10::IntArrayRef(layout.sizes) << " strides "
      << c10::IntArrayRef(layout.strides);
  return out.str();
}

constexpr size_t kMaxEntries = 4096;

struct Entry {
  std::shared_ptr<const Layouts> layouts;
  runtime::DispatchState state;  // what it was learned under (in the key)
  std::string unkeyed;           // the verification mode's only
};

using Cache = std::unordered_map<std::string, Entry>;

// The thread's cache, and the buffer its keys are built in. Reached once
// per call, through a function kept out of line: where the compiler saw
// which thread-local the key's helpers always append to, it wrote each
// append as a new lookup of the thread's storage (__tls_get_addr, about 30
// per call of two tensors).
struct ThreadCache {
  Cache entries;
  std::string key;
};

C10_NOINLINE ThreadCache& thread_cache() {
  thread_local ThreadCache local;
  return local;
}

// The key of a call in a per-thread buffer; false when it cannot be keyed.
bool key_of(const Plan& plan, c10::ArrayRef<c10::IValue> args,
            SameArguments same, const runtime::DispatchState& state,
            std::string& buffer) {
  buffer.clear();
  const Plan* address = &plan;
  append_bytes(buffer, &address, sizeof(address));
  append_bytes(buffer, &same, sizeof(same));
  state.append_to(buffer);
  ValueClasses classes;
  classes.active = writes_only_inputs(plan, same);
  for (const auto& value : args) {
    if (value.isDouble() && classes.append(buffer, value.toDouble())) {
      continue;
    }
    if (!append_key(buffer, value)) {
      return false;
    }
  }
  classes.append_order(buffer);
  return true;
}

}  // namespace

std::string layouts_difference(const Layouts& cached, const Layouts& fresh) {
  if (cached.size() != fresh.size()) {
    return std::to_string(cached.size()) + " outputs then " +
        std::to_string(fresh.size());
  }
  std::string out;
  for (size_t i = 0; i < cached.size(); ++i) {
    const auto& a = cached[i].tensors;
    const auto& b = fresh[i].tensors;
    if (cached[i].is_list && fresh[i].is_list && a.empty() != b.empty()) {
      continue;  // a list written in place: no layouts either way
    }
    for (size_t j = 0; j < std::max(a.size(), b.size()); ++j) {
      const std::string then = j < a.size() ? layout_text(a[j]) : "none";
      const std::string now = j < b.size() ? layout_text(b[j]) : "none";
      if (then != now) {
        out += (out.empty() ? "" : "; ") + std::string("output ") +
            std::to_string(i) + (cached[i].is_list ? "[" + std::to_string(j) + "]" : "") +
            ": cached " + then + ", recomputed " + now;
      }
    }
  }
  return out;
}

std::shared_ptr<const Layouts> find_layouts(const Plan& plan,
                                            c10::ArrayRef<c10::IValue> args,
                                            SameArguments same,
                                            LayoutsKey* miss,
                                            RecomputeLayouts recompute) {
  const runtime::DispatchState state = runtime::DispatchState::current();
  ThreadCache& local = thread_cache();
  if (!key_of(plan, args, same, state, local.key)) {
    return nullptr;
  }
  const auto it = local.entries.find(local.key);
  if (it != local.entries.end()) {
    if (runtime::verify_caches()) {
      // Held apart from the table: recomputing may run calls of its own.
      const Entry entry = it->second;
      std::string difference;
      try {
        const RecomputingHit recomputing;
        difference = layouts_difference(*entry.layouts, recompute());
      } catch (const std::exception& e) {
        difference = std::string("cached layouts, but recomputing raises: ") +
            e.what();
      }
      if (!difference.empty()) {
        const std::string now = unkeyed_of(args);
        runtime::raise_stale_cache(
            "layouts", plan.name, difference, entry.state,
            entry.unkeyed == now ? std::string()
                                 : "then " + entry.unkeyed + "now " + now);
      }
      runtime::count_verified_hit("layouts");
      return entry.layouts;
    }
    return it->second.layouts;
  }
  if (miss != nullptr) {
    miss->key = local.key;
    miss->state = state;
    if (runtime::verify_caches()) {
      miss->unkeyed = unkeyed_of(args);
    }
  }
  return nullptr;
}

void remember_layouts(LayoutsKey key, std::shared_ptr<const Layouts> layouts) {
  if (key.key.empty()) {
    return;
  }
  Cache& entries = thread_cache().entries;
  if (entries.size() >= kMaxEntries) {
    entries.clear();  // entries are shared: callers holding one keep it
  }
  entries.insert_or_assign(
      std::move(key.key),
      Entry{std::move(layouts), key.state, std::move(key.unkeyed)});
}

}  // namespace torch_infini::runtime
