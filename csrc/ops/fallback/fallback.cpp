// Every ATen operator without an infini kernel lands here.
//
// By default it fails clearly, naming the operator. With the opt-in CPU
// fallback on (ops/fallback/fallback_policy.h), the operator runs on the CPU: tensor
// inputs are copied to the host, the CPU kernel runs, every argument it
// wrote (marked in its schema or not: native_batch_norm's running
// statistics) is written back into the original infini tensors and new
// outputs are copied to the device. Those
// copies complete after the current stream's earlier work and before the
// fallback returns (as every copy between the host and the device does), so
// the fallback is ordered with the stream without further synchronization.
//
// Some operators cannot be right through a copy and keep raising even when
// the fallback is on: views (their result must share the input's storage),
// random operators (they would draw from the CPU generator, not the
// device's) and factory operators (no tensor input says where the result
// belongs). Every call is counted in the coverage record (ops/op_coverage.h).

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <optional>
#include <sstream>
#include <string>

#include "core/InfiniFunctions.h"
#include "ops/common.h"
#include "ops/decomposition_scope.h"
#include "ops/fallback/fallback_policy.h"
#include "ops/op_coverage.h"
#include "runtime/ivalue_tensors.h"

namespace torch_infini::ops {
namespace {

// `why`, where given, says why a kernel the provider has cannot run the
// call; otherwise the provider has none.
std::string no_kernel_message(const c10::OperatorHandle& op,
                              const std::string& why = {}) {
  std::ostringstream out;
  if (!why.empty()) {
    out << "The infini device cannot run '" << op.schema().operator_name()
        << "' (provider " << provider_label() << "): " << why << ".";
    if (provider_label() != "host") {
      out << " The built-in host runtime (TORCH_INFINI_PROVIDER=host) runs "
             "every ATen operator that has a CPU kernel.";
    }
    return out.str();
  }
  out << "The infini device has no kernel for '" << op.schema().operator_name()
      << "' (provider " << provider_label() << ").";
  if (provider_label() != "host") {
    out << " InfiniOps has no kernel it maps this operator onto; the built-in "
           "host runtime (TORCH_INFINI_PROVIDER=host) runs every ATen "
           "operator that has a CPU kernel.";
  }
  return out.str();
}

[[noreturn]] void refuse(const c10::OperatorHandle& op, uint8_t operands,
                         const std::string& detail,
                         const std::string& why = {}) {
  if (!decomposing()) {  // a decomposition's try is not a call the program made
    coverage::record(op.schema().operator_name(),
                     coverage::Kind::kUnsupported, 0, operands);
  }
  TORCH_CHECK_NOT_IMPLEMENTED(false, no_kernel_message(op, why), " ", detail);
}


// "normal_", "randperm", "native_dropout", "log_normal" are random by name
// even where the schema has no Generator argument; backward formulas
// ("native_dropout_backward") are not: they replay a saved mask.
bool random_by_name(const std::string& qualified) {
  static const std::array<const char*, 7> kWords = {
      "normal", "uniform", "bernoulli", "dropout", "multinomial",
      "exponential", "random"};
  std::string name = qualified.substr(qualified.find("::") + 2);
  if (name.size() >= 9 && name.compare(name.size() - 9, 9, "_backward") == 0) {
    return false;
  }
  std::istringstream tokens(name);
  std::string token;
  while (std::getline(tokens, token, '_')) {
    if (token.rfind("rand", 0) == 0) {
      return true;
    }
    for (const char* word : kWords) {
      if (token == word) {
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool is_random_operator(const c10::FunctionSchema& schema) {
  return std::any_of(schema.arguments().begin(), schema.arguments().end(),
                     runtime::is_generator_argument) ||
      random_by_name(schema.name());
}

namespace {

bool has_tensor(const c10::IValue& value) {
  if (value.isTensor()) {
    return value.toTensor().defined();
  }
  if (value.isTensorList()) {
    return !value.toTensorList().empty();
  }
  if (value.isList()) {  // Tensor?[]
    for (const auto& element : value.toListRef()) {
      if (has_tensor(element)) {
        return true;
      }
    }
  }
  return false;
}

// Why the CPU fallback cannot run `op` correctly; empty when it can.
std::string structural_refusal(const c10::OperatorHandle& op,
                               c10::ArrayRef<c10::IValue> arguments) {
  const auto& schema = op.schema();
  for (const auto& ret : schema.returns()) {
    if (ret.alias_info() != nullptr && !ret.alias_info()->isWrite()) {
      return "It is a view operator: its result must share its input's "
             "storage, which a CPU copy cannot, so the opt-in CPU fallback "
             "does not run it.";
    }
  }
  if (is_random_operator(schema)) {
    return "It is a random operator: on the CPU it would draw from the CPU "
           "generator, not the device's, so the opt-in CPU fallback does not "
           "run it. Create random tensors on the CPU and copy them to the "
           "infini device.";
  }
  if (std::none_of(arguments.begin(), arguments.end(), has_tensor)) {
    return "It is a factory operator (no tensor inputs), so the opt-in CPU "
           "fallback does not run it. Create the tensor on the CPU and copy "
           "it to the infini device.";
  }
  return "";
}

void collect_infini_devices(const c10::IValue& value,
                            std::optional<c10::Device>& first,
                            std::optional<c10::Device>& other) {
  if (value.isTensor()) {
    const auto& t = value.toTensor();
    if (t.defined() && t.device().type() == kInfini) {
      if (!first.has_value()) {
        first = t.device();
      } else if (t.device() != *first && !other.has_value()) {
        other = t.device();
      }
    }
  } else if (value.isTensorList() || value.isList()) {
    for (const auto& element : value.toListRef()) {
      collect_infini_devices(element, first, other);
    }
  }
}

// The infini device the operator runs for: the device of its infini tensor
// arguments, which must all be on one device (as on CUDA; copying them all to
// the CPU would otherwise hide the mistake).
c10::Device target_device(const c10::OperatorHandle& op,
                          c10::ArrayRef<c10::IValue> arguments) {
  std::optional<c10::Device> first;
  std::optional<c10::Device> other;
  for (const auto& value : arguments) {
    collect_infini_devices(value, first, other);
  }
  TORCH_CHECK(first.has_value(), op.schema().operator_name(),
              ": reached the infini device without an infini tensor argument");
  TORCH_CHECK(!other.has_value(), op.schema().operator_name(),
              ": expected all tensors on the same infini device, got ", *first,
              " and ", *other, "; move them with .to(device) first");
  return *first;
}

// cpu_fallback sends new outputs to the device of the first tensor argument,
// which is the CPU for `torch.tensor(2.) * x` (a CPU 0-dim tensor first).
// As on CUDA, outputs belong on the device: move any left on the CPU. Not
// done for operators with a Device argument: those said where to go.
void move_outputs_to(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     c10::Device device) {
  const auto& schema = op.schema();
  for (const auto& arg : schema.arguments()) {
    if (arg.real_type()->kind() == c10::TypeKind::DeviceObjType) {
      return;
    }
  }
  const size_t count = schema.returns().size();
  const size_t begin = stack->size() - count;
  for (size_t i = 0; i < count; ++i) {
    if (schema.returns()[i].alias_info() != nullptr) {
      continue;  // an infini input put back by cpu_fallback
    }
    c10::IValue& value = (*stack)[begin + i];
    if (value.isTensor()) {
      const auto& t = value.toTensor();
      if (t.defined() && t.device().is_cpu()) {
        value = t.to(device);
      }
    } else if (value.isTensorList()) {
      auto list = value.toTensorList();
      for (size_t j = 0; j < list.size(); ++j) {
        const at::Tensor t = list.get(j);
        if (t.defined() && t.device().is_cpu()) {
          list.set(j, t.to(device));
        }
      }
    }
  }
}

// One infini tensor argument of a fallback call and its CPU copy.
struct HostCopy {
  at::Tensor device;
  at::Tensor cpu;
  at::Tensor before;  // for arguments the schema does not mark as written
};

// The CPU side of an argument: infini tensors (lists too) become CPU copies.
c10::IValue to_host(const c10::IValue& value, bool written,
                    std::vector<HostCopy>& copies) {
  const auto copy = [&](const at::Tensor& t) {
    if (!t.defined() || t.device().type() != kInfini) {
      return t;
    }
    HostCopy c{t, t.to(at::kCPU), {}};
    if (!written) {
      c.before = c.cpu.clone();
    }
    copies.push_back(c);
    return c.cpu;
  };
  return runtime::map_tensors(value, copy);
}

// Runs `op` on CPU copies of its infini tensors, then writes back every
// argument the kernel wrote: those its schema marks (resized as the CPU
// resized them) and those it changed without saying so (native_batch_norm's
// running statistics), found by comparing them with their values before.
// Returns stay where the CPU kernel made them (move_outputs_to moves them),
// except written arguments, returned as the caller's infini tensors.
void run_copying_back(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                      c10::Device device) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  std::vector<c10::IValue> args(stack->end() - nargs, stack->end());
  std::vector<HostCopy> copies;
  torch::jit::Stack cpu;
  for (size_t i = 0; i < nargs; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    cpu.push_back(to_host(args[i], alias != nullptr && alias->isWrite(),
                          copies));
  }
  op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &cpu);
  c10::DeviceGuard guard(device);
  for (const HostCopy& c : copies) {
    if (c.before.defined() && c.before.equal(c.cpu)) {
      continue;  // read only
    }
    at::Tensor target = c.device;
    if (target.sizes() != c.cpu.sizes()) {
      target.resize_(c.cpu.sizes());
    }
    target.copy_(c.cpu);
  }
  size_t written_returned = 0;
  std::vector<size_t> written;
  for (size_t i = 0; i < nargs; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias != nullptr && alias->isWrite()) {
      written.push_back(i);
    }
  }
  for (size_t i = 0; i < schema.returns().size(); ++i) {
    const auto* alias = schema.returns()[i].alias_info();
    if (alias != nullptr && alias->isWrite() &&
        written_returned < written.size()) {
      cpu[i] = args[written[written_returned++]];
    }
  }
  torch::jit::drop(*stack, nargs);
  for (auto& value : cpu) {
    stack->push_back(std::move(value));
  }
}

uint64_t elapsed_ns(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - start)
          .count());
}

// Runs `op` on the CPU (the fallback is on and allows it: checked by the
// callers).
void run_on_cpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  const auto arguments =
      torch::jit::last(*stack, op.schema().arguments().size());
  const c10::Device device = target_device(op, arguments);

  if (fallback_policy::first_fallback(name)) {
    TORCH_WARN("torch_infini: '", name, "' has no infini kernel (provider ",
               provider_label(),
               "); running it on the CPU through the opt-in CPU fallback "
               "(inputs copied to the host, results copied back). Warned "
               "once per operator; torch_infini.fallback.coverage() counts "
               "every call.");
  }
  uint8_t operands = coverage::operands_of(arguments);
  const auto start = std::chrono::steady_clock::now();
  {
    coverage::FallbackScope scope;
    c10::DeviceGuard guard(device);
    run_copying_back(op, stack, device);
    move_outputs_to(op, stack, device);
  }
  operands |= coverage::operands_of(
      torch::jit::last(*stack, op.schema().returns().size()));
  coverage::record(name, coverage::Kind::kFallback, elapsed_ns(start), operands);
}

void infini_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                     const std::string& why) {
  const auto& name = op.schema().operator_name();
  const auto arguments =
      torch::jit::last(*stack, op.schema().arguments().size());
  const uint8_t operands = coverage::operands_of(arguments);

  const std::string structural = structural_refusal(op, arguments);
  if (!structural.empty()) {
    refuse(op, operands,
           structural +
               " Run `python -m torch_infini --ops` for the operators "
               "the device supports.",
           why);
  }
  if (!fallback_policy::enabled()) {
    refuse(op, operands,
           "Run `python -m torch_infini --ops` for the operators it supports; "
           "compute this one on the CPU explicitly (tensor.cpu()) if you need "
           "it, or turn on the opt-in CPU fallback "
           "(TORCH_INFINI_CPU_FALLBACK=1 or torch_infini.fallback.enable()).",
           why);
  }
  if (decomposing()) {
    refuse(op, operands,
           "It is called by a decomposition, whose operators do not fall back "
           "to the CPU one by one: the decomposed operator does, whole.",
           why);
  }
  const std::string listed = fallback_policy::list_refusal(name);
  if (!listed.empty()) {
    std::ostringstream detail;
    detail << "'" << name << "' " << listed
           << ", so it does not fall back to the CPU.";
    refuse(op, operands, detail.str(), why);
  }
  run_on_cpu(op, stack);
}

}  // namespace

void run_on_cpu_for_test(const c10::OperatorHandle& op,
                         torch::jit::Stack* stack) {
  run_on_cpu(op, stack);
}

void cpu_fallback_or_refuse(const c10::OperatorHandle& op,
                            torch::jit::Stack* stack, const std::string& why) {
  infini_fallback(op, stack, why);
}

bool try_cpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  // The same conditions as infini_fallback's, the structural ones included
  // (a random operator must not draw from the CPU generator here either).
  if (!fallback_policy::enabled() || decomposing() ||
      !fallback_policy::list_refusal(op.schema().operator_name()).empty() ||
      !structural_refusal(
           op, torch::jit::last(*stack, op.schema().arguments().size()))
           .empty()) {
    return false;
  }
  run_on_cpu(op, stack);
  return true;
}

namespace {

// Every operator without an infini kernel.
void no_kernel(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  infini_fallback(op, stack, {});
}

}  // namespace

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&no_kernel>());
}

namespace {

void refuse_quantized(const c10::OperatorHandle& op, torch::jit::Stack*) {
  TORCH_CHECK_NOT_IMPLEMENTED(
      false, op.schema().operator_name(),
      " on infini: quantized tensors (torch.quantize_per_tensor, qint8, "
      "quint8, ...) are not supported on the infini device; quantize on the "
      "CPU, or keep a float tensor with its scale and zero point");
}

}  // namespace

// Quantized tensors on infini: refused by whichever operator would make or
// take one, naming itself (not the dispatcher's missing-kernel message).
TORCH_LIBRARY_IMPL(_, QuantizedPrivateUse1, m) {
  m.fallback(torch::CppFunction::makeFromBoxedFunction<&refuse_quantized>());
}

}  // namespace torch_infini::ops
