#include "ops/aten/aten_decompose.h"

#include <algorithm>
#include <atomic>
#include <vector>

namespace torch_infini::ops {
namespace {

std::atomic<DecomposeHook> installed{nullptr};

// The overloads being decomposed on this thread, innermost last.
std::vector<const c10::FunctionSchema*>& in_progress() {
  thread_local std::vector<const c10::FunctionSchema*> schemas;
  return schemas;
}

}  // namespace

void set_decompose_hook(DecomposeHook hook) { installed.store(hook); }

bool try_decompose(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                   std::string* refusal) {
  const DecomposeHook hook = installed.load();
  auto& running = in_progress();
  if (hook == nullptr ||
      std::find(running.begin(), running.end(), &op.schema()) !=
          running.end()) {
    return false;
  }
  running.push_back(&op.schema());
  struct Pop {
    std::vector<const c10::FunctionSchema*>& running;
    ~Pop() { running.pop_back(); }
  } pop{running};
  return hook(op, stack, refusal);
}

}  // namespace torch_infini::ops
