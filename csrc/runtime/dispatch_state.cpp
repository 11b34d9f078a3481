#include "runtime/dispatch_state.h"

#include <ATen/Context.h>
#include <ATen/autocast_mode.h>
#include <c10/core/DefaultDtype.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/core/GradMode.h>
#include <c10/core/InferenceMode.h>
#include <c10/core/impl/LocalDispatchKeySet.h>

#if defined(__x86_64__) || defined(_M_X64)
#include <xmmintrin.h>
#endif

#include <sstream>

namespace torch_infini::runtime {
namespace {

// Where each part sits in the snapshot: word 0 packs the small parts (a
// field of `bits` bits at `shift`), words 1 and 2 are the dispatch-key TLS.
struct Field {
  const char* name;
  int shift;
  int bits;
  bool dtype;  // a ScalarType, printed by name
};

constexpr Field kFields[] = {
    {"default dtype", 0, 8, true},
    {"grad mode", 8, 1, false},
    {"inference mode", 9, 1, false},
    {"deterministic algorithms", 10, 1, false},
    {"deterministic algorithms warn only", 11, 1, false},
    {"fill uninitialized memory", 12, 1, false},
    {"float32 matmul precision", 13, 2, false},
    {"TF32 in cuBLAS", 15, 1, false},
    {"flush denormal (the calling thread's FTZ/DAZ)", 16, 2, false},
    {"autocast on CPU", 18, 1, false},
    {"autocast on CUDA", 19, 1, false},
    {"autocast on infini", 20, 1, false},
    {"autocast dtype on CPU", 24, 8, true},
    {"autocast dtype on CUDA", 32, 8, true},
    {"autocast dtype on infini", 40, 8, true},
};

uint64_t put(uint64_t value, const Field& field) {
  return (value & ((uint64_t{1} << field.bits) - 1)) << field.shift;
}

uint64_t get(uint64_t word, const Field& field) {
  return (word >> field.shift) & ((uint64_t{1} << field.bits) - 1);
}

uint64_t flush_denormal_bits() {
#if defined(__x86_64__) || defined(_M_X64)
  const unsigned csr = _mm_getcsr();
  return ((csr >> 15) & 1) | (((csr >> 6) & 1) << 1);  // FTZ, DAZ
#else
  return 0;
#endif
}

std::string value_text(uint64_t value, const Field& field) {
  if (field.dtype) {
    return c10::toString(static_cast<c10::ScalarType>(value));
  }
  if (field.bits == 1) {
    return value ? "on" : "off";
  }
  return std::to_string(value);
}

std::string keys_text(uint64_t raw) {
  std::ostringstream out;
  out << c10::DispatchKeySet(c10::DispatchKeySet::RAW, raw);
  return out.str();
}

}  // namespace

DispatchState DispatchState::current() {
  const auto& context = at::globalContext();
  const auto autocast = [](c10::DeviceType type) {
    return at::autocast::is_autocast_enabled(type);
  };
  const auto autocast_dtype = [](c10::DeviceType type) {
    return static_cast<uint64_t>(at::autocast::get_autocast_dtype(type));
  };
  uint64_t small = 0;
  const auto set = [&small](size_t field, uint64_t value) {
    small |= put(value, kFields[field]);
  };
  set(0, static_cast<uint64_t>(c10::get_default_dtype_as_scalartype()));
  set(1, c10::GradMode::is_enabled());
  set(2, c10::InferenceMode::is_enabled());
  set(3, context.deterministicAlgorithms());
  set(4, context.deterministicAlgorithmsWarnOnly());
  set(5, context.deterministicFillUninitializedMemory());
  set(6, static_cast<uint64_t>(context.float32MatmulPrecision()));
  set(7, context.allowTF32CuBLAS());
  set(8, flush_denormal_bits());
  set(9, autocast(c10::DeviceType::CPU));
  set(10, autocast(c10::DeviceType::CUDA));
  set(11, autocast(c10::DeviceType::PrivateUse1));
  set(12, autocast_dtype(c10::DeviceType::CPU));
  set(13, autocast_dtype(c10::DeviceType::CUDA));
  set(14, autocast_dtype(c10::DeviceType::PrivateUse1));
  const c10::impl::LocalDispatchKeySet tls =
      c10::impl::tls_local_dispatch_key_set();
  DispatchState state;
  state.words = {small, tls.included_.raw_repr(), tls.excluded_.raw_repr(), 0};
  return state;
}

std::string DispatchState::differences_from(const DispatchState& was) const {
  std::string out;
  const auto add = [&out](const std::string& name, const std::string& then,
                          const std::string& now) {
    out += (out.empty() ? "" : "; ") + name + ": " + then + " then " + now;
  };
  for (const Field& field : kFields) {
    const uint64_t then = get(was.words[0], field);
    const uint64_t now = get(words[0], field);
    if (then != now) {
      add(field.name, value_text(then, field), value_text(now, field));
    }
  }
  if (was.words[1] != words[1]) {
    add("dispatch keys included (thread-local)", keys_text(was.words[1]),
        keys_text(words[1]));
  }
  if (was.words[2] != words[2]) {
    add("dispatch keys excluded (thread-local)", keys_text(was.words[2]),
        keys_text(words[2]));
  }
  return out;
}

}  // namespace torch_infini::runtime
