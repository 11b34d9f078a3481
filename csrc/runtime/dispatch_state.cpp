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

#include <iterator>
#include <sstream>

namespace torch_infini::runtime {
namespace {

// Where each part sits in the snapshot: word 0 packs the small parts (a
// field of `bits` bits at `shift`), words 1 and 2 are the dispatch-key TLS.
enum class Printed { kValue, kDtype, kPrecision };  // a value, or a name

struct Field {
  const char* name;
  int shift;
  int bits;
  Printed as;
};

constexpr Field kFields[] = {
    {"default dtype", 0, 8, Printed::kDtype},
    {"grad mode", 8, 1, Printed::kValue},
    {"inference mode", 9, 1, Printed::kValue},
    {"deterministic algorithms", 10, 1, Printed::kValue},
    {"deterministic algorithms warn only", 11, 1, Printed::kValue},
    {"fill uninitialized memory", 12, 1, Printed::kValue},
    // Per backend, through the API that never raises: the one-name
    // getters (float32MatmulPrecision, allowTF32CuBLAS) raise where a
    // program set the precision through the per-backend API alone
    // (torch.backends.cuda.matmul.fp32_precision = "tf32").
    {"float32 matmul precision on CUDA (fp32_precision)", 48, 4, Printed::kPrecision},
    {"float32 matmul precision on oneDNN (fp32_precision)", 52, 4, Printed::kPrecision},
    {"flush denormal (the calling thread's FTZ/DAZ)", 16, 2, Printed::kValue},
    {"autocast on CPU", 18, 1, Printed::kValue},
    {"autocast on CUDA", 19, 1, Printed::kValue},
    {"autocast on infini", 20, 1, Printed::kValue},
    {"autocast dtype on CPU", 24, 8, Printed::kDtype},
    {"autocast dtype on CUDA", 32, 8, Printed::kDtype},
    {"autocast dtype on infini", 40, 8, Printed::kDtype},
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
  if (field.as == Printed::kDtype) {
    return c10::toString(static_cast<c10::ScalarType>(value));
  }
  if (field.as == Printed::kPrecision) {
    // at::Float32Precision's values, in the order every release keeps.
    constexpr const char* kNames[] = {"none", "ieee", "tf32", "bf16",
                                      "default", "bf16x9"};
    return value < std::size(kNames) ? kNames[value] : std::to_string(value);
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
  set(6, static_cast<uint64_t>(context.float32Precision(
             at::Float32Backend::CUDA, at::Float32Op::MATMUL)));
  set(7, static_cast<uint64_t>(context.float32Precision(
             at::Float32Backend::MKLDNN, at::Float32Op::MATMUL)));
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
