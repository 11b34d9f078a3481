// Provider selection: once per process. Order: an InfiniRT accelerator with a
// device, then InfiniRT's CPU backend, then the built-in host runtime.
// TORCH_INFINI_PROVIDER=host|infini|auto forces the choice.

#include <c10/util/Exception.h>

#include <pthread.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "runtime/env.h"
#include "runtime/generic_call.h"
#include "runtime/host/host_provider.h"
#include "runtime/kernels.h"
#include "runtime/selection.h"

namespace torch_infini::runtime {

#ifdef TORCH_INFINI_WITH_INFINI_STACK
namespace infini {
// Defined in runtime/infini: the InfiniRT/InfiniOps provider, on the best
// InfiniRT backend that has a device.
std::unique_ptr<Provider> make_infini_provider();
}  // namespace infini
#endif

bool infini_stack_compiled() {
#ifdef TORCH_INFINI_WITH_INFINI_STACK
  return true;
#else
  return false;
#endif
}

namespace {

struct Refusals {
  std::mutex mutex;
  std::map<std::string, std::string> by_backend;
};

Refusals& refusals() {
  static Refusals& instance = *std::make_unique<Refusals>().release();
  return instance;
}

// Used only where the Infini stack is compiled in.
[[maybe_unused]] std::string refusal_of(const std::string& backend) {
  auto& r = refusals();
  std::lock_guard<std::mutex> guard(r.mutex);
  const auto it = r.by_backend.find(backend);
  return it == r.by_backend.end() ? std::string() : it->second;
}

struct Selection {
  std::unique_ptr<Provider> provider;
  std::string requested;
  std::string reason;
};

Selection select() {
  Selection s;
  s.requested =
      env_choice("TORCH_INFINI_PROVIDER", "auto", {"auto", "host", "infini"});
  // Checked whatever the provider, so that a typo is never silently ignored.
  const std::string rt_backend = env_choice(
      "TORCH_INFINI_RT_BACKEND", "",
      {"cpu", "nvidia", "cambricon", "ascend", "metax", "moore", "iluvatar",
       "hygon"});
  // Read by torch_infini/_autograd.py at import, which must not raise there
  // (torch's backend autoload would hide the message): validated here.
  env_switch("TORCH_INFINI_AUTOGRAD_DEVICE_THREADS", false);
  if (s.requested == "host") {
    s.provider = std::make_unique<host::HostProvider>();
    s.reason = "forced by TORCH_INFINI_PROVIDER=host";
    return s;
  }
#ifdef TORCH_INFINI_WITH_INFINI_STACK
  s.provider = infini::make_infini_provider();
  const std::string refused = refusal_of(s.provider->backend());
  TORCH_CHECK(refused.empty(), refused);
  s.reason = s.requested == "infini"
      ? "forced by TORCH_INFINI_PROVIDER=infini"
      : "Infini stack compiled in; InfiniRT backend '" +
          s.provider->backend() + "' selected";
  if (!rt_backend.empty()) {
    s.reason += ", forced by TORCH_INFINI_RT_BACKEND=" + rt_backend;
  }
  const std::string detail = s.provider->selection_detail();
  if (!detail.empty()) {
    s.reason += ", passed over: " + detail;
  }
#else
  TORCH_CHECK(s.requested != "infini",
              "TORCH_INFINI_PROVIDER=infini, but this build of torch_infini "
              "has no Infini stack: rebuild with INFINI_RT_PREFIX and "
              "INFINI_OPS_PREFIX set (see the README), or unset "
              "TORCH_INFINI_PROVIDER to use the host runtime");
  TORCH_CHECK(rt_backend.empty(), "TORCH_INFINI_RT_BACKEND=", rt_backend,
              ", but this build of torch_infini has no Infini stack: rebuild "
              "with INFINI_RT_PREFIX and INFINI_OPS_PREFIX set (see the "
              "README), or unset TORCH_INFINI_RT_BACKEND");
  s.provider = std::make_unique<host::HostProvider>();
  s.reason = "Infini stack not compiled in";
#endif
  return s;
}

// Set in a child forked after the runtime started: the child has none of the
// parent's stream workers (or accelerator context), so any use would hang or
// crash. As torch.cuda does, such a child must not use the device.
std::atomic<bool> bad_fork{false};

void mark_child_bad() {
  bad_fork.store(true);
}

Selection& selection() {
  // Leaked on purpose: stream workers and allocator deleters may still run
  // while the interpreter shuts down, after static destructors would have
  // destroyed a provider with static storage.
  static Selection& s = [] () -> Selection& {
    Selection& made = *std::make_unique<Selection>(select()).release();
    pthread_atfork(nullptr, nullptr, &mark_child_bad);
    return made;
  }();
  return s;
}

}  // namespace

bool in_bad_fork() {
  return bad_fork.load(std::memory_order_relaxed);
}

// What a forked child that touches the runtime is told (torch.cuda's words).
constexpr const char* kForkedChild =
    "Cannot re-initialize infini in forked subprocess. To use infini with "
    "multiprocessing, you must use the 'spawn' start method";

Provider& provider() {
  TORCH_CHECK(!in_bad_fork(), kForkedChild);
  return *selection().provider;
}

void OpKernels::serve(GenericCall& call) {
  call.queue_declared();
}

OpKernels& kernels() {
  static OpKernels& table = provider().kernels();
  // Raises in a forked child, as every runtime entry does (read here, not
  // through provider(): every generic-kernel call asks).
  TORCH_CHECK(!bad_fork.load(std::memory_order_relaxed), kForkedChild);
  return table;
}

std::string selection_reason() {
  return selection().reason;
}

void refuse_backend(const std::string& backend, const std::string& why) {
  auto& r = refusals();
  std::lock_guard<std::mutex> guard(r.mutex);
  r.by_backend[backend] = why;
}

std::map<std::string, std::string> backend_refusals() {
  auto& r = refusals();
  std::lock_guard<std::mutex> guard(r.mutex);
  return r.by_backend;
}

void Provider::launch_host_func(int /*device*/, StreamHandle /*stream*/,
                                std::function<void()> /*fn*/,
                                const char* label) {
  TORCH_CHECK(false, "launch_host_func(", label, "): infini on ", name(), "/",
              backend(), " cannot queue host functions on its streams "
              "(capabilities.host_funcs=no)");
}

}  // namespace torch_infini::runtime
