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

struct Entry {
  std::string op;  // "aten::cumsum.out"
  Kind kind;
  uint64_t calls = 0;
  uint64_t nanoseconds = 0;  // host time, inclusive of nested operators
};

// A fallback or unsupported record made inside the counted call of the same
// operator (the generic kernel's) replaces that call's native count.
void record(const c10::OperatorName& op, Kind kind, uint64_t nanoseconds);

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
