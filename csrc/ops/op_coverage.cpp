#include "ops/op_coverage.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "core/InfiniFunctions.h"

namespace torch_infini::ops::coverage {
namespace {

constexpr size_t kKinds = 5;

struct Counter {
  uint64_t calls = 0;
  uint64_t nanoseconds = 0;
  uint64_t bool_calls = 0;
  uint64_t complex_calls = 0;
};

// Leaked on purpose: operators (and so record()) may run during static
// destruction.
struct Table {
  std::mutex mutex;  // held to update or copy the counters only
  std::unordered_map<c10::OperatorName, std::array<Counter, kKinds>> counters;
};

Table& table() {
  static Table& instance = *std::make_unique<Table>().release();
  return instance;
}

thread_local bool in_fallback = false;

uint64_t now_ns() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// --- counting the device's own kernels (only while recording) ---------------

// How an operator the dispatcher is about to run reaches the infini device.
enum class Route { kNative, kComposite, kBoxedFallback };

// Cached per operator: a dispatcher lookup per call would cost more than
// the counting itself. Cleared when recording starts, so kernels registered
// in between are seen.
struct RouteCache {
  std::mutex mutex;
  std::unordered_map<c10::OperatorName, Route> routes;
};

RouteCache& route_cache() {
  static RouteCache& instance = *std::make_unique<RouteCache>().release();
  return instance;
}

Route compute_route(const c10::OperatorName& name) {
  const auto op = c10::Dispatcher::singleton().findOp(name);
  if (!op.has_value()) {
    return Route::kBoxedFallback;
  }
  if (op->hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
    return Route::kNative;
  }
  for (auto key : {c10::DispatchKey::CompositeExplicitAutogradNonFunctional,
                   c10::DispatchKey::CompositeExplicitAutograd,
                   c10::DispatchKey::CompositeImplicitAutograd}) {
    if (op->hasKernelForDispatchKey(key)) {
      return Route::kComposite;
    }
  }
  // The boxed fallback counts these itself (fell back or raised).
  return Route::kBoxedFallback;
}

Route route_of(const c10::OperatorName& name) {
  auto& cache = route_cache();
  {
    std::lock_guard<std::mutex> guard(cache.mutex);
    auto it = cache.routes.find(name);
    if (it != cache.routes.end()) {
      return it->second;
    }
  }
  const Route route = compute_route(name);
  std::lock_guard<std::mutex> guard(cache.mutex);
  cache.routes.emplace(name, route);
  return route;
}

bool on_infini(const c10::IValue& value) {
  if (value.isTensor()) {
    const auto& t = value.toTensor();
    // Fake and functional tensors (torch.compile tracing a graph, export)
    // say infini but hold no device memory: their calls run no kernel.
    static const c10::DispatchKeySet traced(
        {c10::DispatchKey::Python, c10::DispatchKey::Functionalize});
    return t.defined() && t.device().type() == kInfini &&
        !t.key_set().has_any(traced);
  }
  if (value.isList()) {  // Tensor[] and Tensor?[]
    for (const auto& element : value.toListRef()) {
      if (on_infini(element)) {
        return true;
      }
    }
    return false;
  }
  // Factory operators: the device argument.
  return value.isDevice() && value.toDevice().type() == kInfini;
}

// One counted call in progress. The innermost one on each thread is known,
// so that what happens inside it can correct its kind: a call of the generic
// kernel (registered for the operator, so "native" by its route) that went
// through the CPU fallback or was refused is counted as that only, and a
// kernel that served the call otherwise than its route says (a fused
// InfiniOps kernel behind a composite operator, a composition behind a
// registered kernel) says what it did.
struct CallContext final : at::ObserverContext {
  CallContext(c10::OperatorName op, Kind kind, CallContext* outer,
              uint8_t operands)
      : op(std::move(op)), kind(kind), start(now_ns()), outer(outer),
        operands(operands) {}
  c10::OperatorName op;
  Kind kind;
  uint64_t start;
  CallContext* outer;
  uint8_t operands;  // its inputs' Operands; its results' are added at the end
  bool superseded = false;  // counted as fallback or unsupported instead
};

thread_local CallContext* innermost = nullptr;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (in_fallback) {
    return nullptr;
  }
  const auto inputs = fn.inputs();
  if (std::none_of(inputs.begin(), inputs.end(),
                   [](const c10::IValue& v) { return on_infini(v); })) {
    return nullptr;
  }
  auto name = fn.operator_name();
  if (!name.has_value()) {
    return nullptr;
  }
  const Route route = route_of(*name);
  if (route == Route::kBoxedFallback) {
    return nullptr;
  }
  auto context = std::make_unique<CallContext>(
      std::move(*name),
      route == Route::kNative ? Kind::kNative : Kind::kComposite, innermost,
      operands_of(inputs));
  innermost = context.get();
  return context;
}

void on_end(const at::RecordFunction& fn, at::ObserverContext* context) {
  if (context == nullptr) {
    return;
  }
  auto* call = static_cast<CallContext*>(context);
  if (innermost == call) {
    innermost = call->outer;
  }
  if (!call->superseded) {
    // A comparison's bool result counts as a bool tensor of the call.
    const uint8_t operands = call->operands | operands_of(fn.outputs());
    record(call->op, call->kind, now_ns() - call->start, operands);
  }
}

// The innermost call in progress on this thread if it is one of `op`.
CallContext* current_call_of(const c10::OperatorName& op) {
  return innermost != nullptr && innermost->op == op ? innermost : nullptr;
}

struct Recorder {
  std::mutex mutex;
  at::CallbackHandle handle = at::INVALID_CALLBACK_HANDLE;
};

Recorder& recorder() {
  static Recorder& instance = *std::make_unique<Recorder>().release();
  return instance;
}

}  // namespace

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kNative: return "native";
    case Kind::kComposite: return "composite";
    case Kind::kFallback: return "fallback";
    case Kind::kUnsupported: return "unsupported";
    case Kind::kAtenBacked: return "aten-backed";
  }
  return "unknown";
}

uint8_t operand_flags(const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      return kPlainOperands;
    }
    return (t.scalar_type() == c10::ScalarType::Bool ? kBoolOperands : 0) |
        (t.is_complex() ? kComplexOperands : 0);
  }
  if (v.isList()) {  // Tensor[] and Tensor?[]
    return operands_of(v.toListRef());
  }
  return kPlainOperands;
}

void record(const c10::OperatorName& op, Kind kind, uint64_t nanoseconds,
            uint8_t operands) {
  if (kind == Kind::kFallback || kind == Kind::kUnsupported) {
    // The generic kernel's call that fell back (or was refused) is counted
    // as that, not also as a native call.
    if (CallContext* call = current_call_of(op)) {
      call->superseded = true;
      operands |= call->operands;
    }
  }
  auto& t = table();
  std::lock_guard<std::mutex> guard(t.mutex);
  Counter& counter = t.counters[op][static_cast<size_t>(kind)];
  ++counter.calls;
  counter.nanoseconds += nanoseconds;
  counter.bool_calls += (operands & kBoolOperands) != 0;
  counter.complex_calls += (operands & kComplexOperands) != 0;
}

std::vector<Entry> snapshot() {
  std::vector<Entry> entries;
  {
    auto& t = table();
    std::lock_guard<std::mutex> guard(t.mutex);
    for (const auto& [op, counters] : t.counters) {
      for (size_t k = 0; k < kKinds; ++k) {
        if (counters[k].calls > 0) {
          entries.push_back({c10::toString(op), static_cast<Kind>(k),
                             counters[k].calls, counters[k].nanoseconds,
                             counters[k].bool_calls,
                             counters[k].complex_calls});
        }
      }
    }
  }
  // Fallbacks first (what left the device), then what failed, then what ran
  // on it; the costliest first within each.
  auto order = [](Kind k) {
    switch (k) {
      case Kind::kFallback: return 0;
      case Kind::kUnsupported: return 1;
      case Kind::kNative: return 2;
      case Kind::kAtenBacked: return 3;
      case Kind::kComposite: return 4;
    }
    return 5;
  };
  std::sort(entries.begin(), entries.end(), [&](const Entry& a, const Entry& b) {
    if (order(a.kind) != order(b.kind)) {
      return order(a.kind) < order(b.kind);
    }
    if (a.nanoseconds != b.nanoseconds) {
      return a.nanoseconds > b.nanoseconds;
    }
    return a.op < b.op;
  });
  return entries;
}

void served_as(const c10::OperatorName& op, Kind kind) {
  if (CallContext* call = current_call_of(op)) {
    call->kind = kind;
  }
}

void reset() {
  auto& t = table();
  std::lock_guard<std::mutex> guard(t.mutex);
  t.counters.clear();
}

void start_recording() {
  auto& r = recorder();
  std::lock_guard<std::mutex> guard(r.mutex);
  if (r.handle != at::INVALID_CALLBACK_HANDLE) {
    return;
  }
  {
    auto& cache = route_cache();
    std::lock_guard<std::mutex> cache_guard(cache.mutex);
    cache.routes.clear();
  }
  r.handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&on_start, &on_end)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION}));
}

void stop_recording() {
  auto& r = recorder();
  std::lock_guard<std::mutex> guard(r.mutex);
  if (r.handle == at::INVALID_CALLBACK_HANDLE) {
    return;
  }
  at::removeCallback(r.handle);
  r.handle = at::INVALID_CALLBACK_HANDLE;
}

bool recording() {
  auto& r = recorder();
  std::lock_guard<std::mutex> guard(r.mutex);
  return r.handle != at::INVALID_CALLBACK_HANDLE;
}

FallbackScope::FallbackScope() : previous_(in_fallback) {
  in_fallback = true;
}

FallbackScope::~FallbackScope() {
  in_fallback = previous_;
}

}  // namespace torch_infini::ops::coverage
