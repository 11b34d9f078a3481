#pragma once

// The operator coverage record: for every operator called on infini tensors,
// how it ran (natively, through the CPU fallback, or not at all), how often,
// and the host time it took. Process-wide.
//
// Calls that reach the boxed fallback are always counted (they already pay
// for copies). Calls to the device's own kernels are counted only while
// recording is on: recording installs a global at::RecordFunction callback,
// and removes it when it stops, so the dispatcher's fast path is untouched
// the rest of the time.

#include <ATen/core/ivalue.h>
#include <ATen/core/operator_name.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torch_infini::ops::coverage {

enum class Kind {
  kNative,       // an infini kernel registered for the operator
  kComposite,    // ATen's device-generic decomposition (its parts are counted)
  kFallback,     // ran on the CPU through the opt-in fallback
  kUnsupported,  // raised NotImplementedError
  kAtenBacked,   // an InfiniOps kernel's ATen-backed implementation
};

const char* kind_name(Kind kind);

// What of a call's tensors InfiniRT has no DataType for: the Infini stack
// passes them only where a reinterpretation is exact (bool as bytes,
// complex as pairs), so such calls are counted apart.
enum Operands : uint8_t {
  kPlainOperands = 0,
  kBoolOperands = 1,     // a bool tensor among its arguments or results
  kComplexOperands = 2,  // a complex tensor among them
};

// The Operands flags of `value` (a tensor, a list of tensors; else none).
uint8_t operand_flags(const c10::IValue& value);

// The Operands flags of a range of values (a call's stack, its inputs).
template <typename Values>
uint8_t operands_of(const Values& values) {
  uint8_t flags = kPlainOperands;
  for (const c10::IValue& v : values) {
    flags |= operand_flags(v);
  }
  return flags;
}

struct Entry {
  std::string op;  // "aten::cumsum.out"
  Kind kind;
  uint64_t calls = 0;
  uint64_t nanoseconds = 0;  // host time, inclusive of nested operators
  uint64_t bool_calls = 0;     // of `calls`, those with a bool tensor
  uint64_t complex_calls = 0;  // of `calls`, those with a complex tensor
};

// A fallback or unsupported record made inside the counted call of the same
// operator (the generic kernel's) replaces that call's native count (and
// keeps its Operands). `operands`: the call's Operands flags.
void record(const c10::OperatorName& op, Kind kind, uint64_t nanoseconds,
            uint8_t operands = kPlainOperands);

// The counted call of `op` in progress on this thread, if any, ran as `kind`
// (a fused kernel serving a composite operator: kNative; a kernel that
// composed the call from other operators: kComposite).
void served_as(const c10::OperatorName& op, Kind kind);

// The record, sorted by kind, then by time spent (most first).
std::vector<Entry> snapshot();
void reset();

// Native calls are counted only between start_recording() and
// stop_recording(). Both are idempotent.
void start_recording();
void stop_recording();
bool recording();

// While alive, the calling thread is running an operator on the CPU for the
// fallback: the copies and CPU kernels it dispatches are part of that
// fallback call and are not counted on their own.
class FallbackScope {
 public:
  FallbackScope();
  ~FallbackScope();
  FallbackScope(const FallbackScope&) = delete;
  FallbackScope& operator=(const FallbackScope&) = delete;

 private:
  bool previous_;
};

}  // namespace torch_infini::ops::coverage
