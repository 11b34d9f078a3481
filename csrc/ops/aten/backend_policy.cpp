#include "ops/aten/backend_policy.h"

#include <ATen/core/stack.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "ops/aten/aten_kernel.h"
#include "ops/decomposition_scope.h"
#include "ops/op_coverage.h"

namespace torch_infini::ops::backend_policy {
namespace {

struct Policy {
  std::string backend;
  std::string pin;
  std::string setting;
  std::unordered_set<std::string> served;
};

// Leaked on purpose, like the coverage table: operators may run during
// static destruction.
struct State {
  std::mutex mutex;  // held to read or replace the policy, never over a call
  std::shared_ptr<const Policy> policy;
};

State& state() {
  static State& instance = *std::make_unique<State>().release();
  return instance;
}

std::atomic<bool> enforcing{false};

std::shared_ptr<const Policy> current() {
  auto& s = state();
  std::lock_guard<std::mutex> guard(s.mutex);
  return s.policy;
}

}  // namespace

void enforce(std::string backend, std::string pin, std::string setting,
             const std::vector<std::string>& served) {
  auto policy = std::make_shared<Policy>();
  policy->backend = std::move(backend);
  policy->pin = std::move(pin);
  policy->setting = std::move(setting);
  policy->served.insert(served.begin(), served.end());
  auto& s = state();
  std::lock_guard<std::mutex> guard(s.mutex);
  s.policy = std::move(policy);
  enforcing.store(true, std::memory_order_release);
}

void clear() {
  auto& s = state();
  std::lock_guard<std::mutex> guard(s.mutex);
  enforcing.store(false, std::memory_order_release);
  s.policy.reset();
}

bool active() {
  return enforcing.load(std::memory_order_acquire);
}

std::vector<std::string> target() {
  const auto policy = current();
  if (!policy) {
    return {"", ""};
  }
  return {policy->backend, policy->pin};
}

bool divert(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  if (!enforcing.load(std::memory_order_relaxed)) {
    return false;
  }
  const auto policy = current();
  if (!policy) {
    return false;
  }
  const std::string name = c10::toString(op.operator_name());
  if (policy->served.count(name) != 0) {
    return false;
  }
  // The one exit, without a decomposition (the backend would have to serve
  // its parts natively, which this policy does not ask): the opt-in CPU
  // fallback (never a random operator, which would draw from the CPU
  // generator there, as on the stack), else a refusal.
  serve_unserved(op, stack, {false, [&](const std::string&) {
    if (!decomposing()) {  // a decomposition's try is not a call the program made
      coverage::record(op.operator_name(), coverage::Kind::kUnsupported, 0,
                       coverage::operands_of(torch::jit::last(
                           *stack, op.schema().arguments().size())));
    }
    TORCH_CHECK_NOT_IMPLEMENTED(
        false, name, " is not served natively by InfiniOps ", policy->pin,
        " on backend '", policy->backend, "' (TORCH_INFINI_ENFORCE_BACKEND=",
        policy->setting, "). On that backend it would be refused, or run on ",
        "the CPU through the opt-in fallback (TORCH_INFINI_CPU_FALLBACK=1). ",
        "`python -m torch_infini coverage --backend ", policy->backend,
        " -- script.py` lists every such call of a program.");
  }});
  return true;
}

}  // namespace torch_infini::ops::backend_policy
