#include "ops/fallback/fallback_policy.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_set>

#include "ops/common.h"
#include "runtime/env.h"

namespace torch_infini::ops::fallback_policy {
namespace {

constexpr const char* kEnableVar = "TORCH_INFINI_CPU_FALLBACK";
constexpr const char* kAllowVar = "TORCH_INFINI_CPU_FALLBACK_ALLOW";
constexpr const char* kDenyVar = "TORCH_INFINI_CPU_FALLBACK_DENY";

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\n");
  if (first == std::string::npos) {
    return "";
  }
  return text.substr(first, text.find_last_not_of(" \t\n") - first + 1);
}

bool env_flag(const char* name) {
  return runtime::env_switch(name, false);
}

// Every registered aten operator, with and without its overload, to check
// list entries against: a typo must not silently leave an operator on (or
// off) the fallback.
bool known_aten_name(const std::string& name) {
  const auto all = c10::Dispatcher::singleton().getAllOpNames();
  return std::any_of(all.begin(), all.end(), [&](const c10::OperatorName& op) {
    return op.name == name ||
        (!op.overload_name.empty() && op.name + "." + op.overload_name == name);
  });
}

// "cumsum" -> "aten::cumsum"; checked when it is an aten name. `source`
// names where the list came from, for the error.
std::string normalize(const std::string& raw, const char* source) {
  std::string name = trim(raw);
  if (name.find("::") == std::string::npos) {
    name = "aten::" + name;
  }
  TORCH_CHECK(name.rfind("aten::", 0) != 0 || known_aten_name(name), source,
              ": '", raw,
              "' is not an ATen operator name (expected e.g. 'aten::cumsum' "
              "for every overload, or 'aten::cumsum.out' for one)");
  return name;
}

std::unordered_set<std::string> parse_list(const std::vector<std::string>& raw,
                                           const char* source) {
  std::unordered_set<std::string> names;
  for (const auto& entry : raw) {
    if (!trim(entry).empty()) {
      names.insert(normalize(entry, source));
    }
  }
  return names;
}

std::vector<std::string> split_commas(const std::string& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    parts.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return parts;
}

// The lists and the warned-about operators. Held only to read or update
// them, never while an operator runs.
struct Lists {
  std::mutex mutex;
  std::unordered_set<std::string> allow;
  std::unordered_set<std::string> deny;
  std::set<std::string> warned;
};

struct State {
  std::atomic<bool> on{false};
  Lists lists;
};

// Built at first use from the environment. A malformed variable raises
// (naming it) on that use and on every later one: call_once retries after an
// exception, so it is never silently ignored.
State& state() {
  // Leaked on purpose: the fallback may run during static destruction.
  static State* instance = nullptr;
  static std::once_flag once;
  std::call_once(once, [] {
    auto fresh = std::make_unique<State>();
    fresh->on.store(env_flag(kEnableVar));
    fresh->lists.allow =
        parse_list(split_commas(runtime::env_string(kAllowVar, "")), kAllowVar);
    fresh->lists.deny =
        parse_list(split_commas(runtime::env_string(kDenyVar, "")), kDenyVar);
    instance = fresh.release();
  });
  return *instance;
}

std::vector<std::string> sorted(const std::unordered_set<std::string>& names) {
  std::vector<std::string> out(names.begin(), names.end());
  std::sort(out.begin(), out.end());
  return out;
}

bool listed(const std::unordered_set<std::string>& names,
            const c10::OperatorName& op) {
  return names.count(op.name) > 0 || names.count(full_name(op)) > 0;
}

}  // namespace

bool enabled() {
  return state().on.load(std::memory_order_relaxed);
}

void set_enabled(bool on) {
  state().on.store(on, std::memory_order_relaxed);
}

void set_allow_list(const std::vector<std::string>& names) {
  auto parsed = parse_list(names, "torch_infini.fallback.allow");
  auto& lists = state().lists;
  std::lock_guard<std::mutex> guard(lists.mutex);
  lists.allow = std::move(parsed);
}

void set_deny_list(const std::vector<std::string>& names) {
  auto parsed = parse_list(names, "torch_infini.fallback.deny");
  auto& lists = state().lists;
  std::lock_guard<std::mutex> guard(lists.mutex);
  lists.deny = std::move(parsed);
}

std::vector<std::string> allow_list() {
  auto& lists = state().lists;
  std::lock_guard<std::mutex> guard(lists.mutex);
  return sorted(lists.allow);
}

std::vector<std::string> deny_list() {
  auto& lists = state().lists;
  std::lock_guard<std::mutex> guard(lists.mutex);
  return sorted(lists.deny);
}

std::string list_refusal(const c10::OperatorName& op) {
  auto& lists = state().lists;
  std::lock_guard<std::mutex> guard(lists.mutex);
  if (listed(lists.deny, op)) {
    return "is on the CPU fallback's deny-list (TORCH_INFINI_CPU_FALLBACK_DENY "
           "or torch_infini.fallback.deny())";
  }
  if (!lists.allow.empty() && !listed(lists.allow, op)) {
    return "is not on the CPU fallback's allow-list "
           "(TORCH_INFINI_CPU_FALLBACK_ALLOW or torch_infini.fallback.allow())";
  }
  return "";
}

bool first_fallback(const c10::OperatorName& op) {
  auto& lists = state().lists;
  std::lock_guard<std::mutex> guard(lists.mutex);
  return lists.warned.insert(full_name(op)).second;
}

}  // namespace torch_infini::ops::fallback_policy
