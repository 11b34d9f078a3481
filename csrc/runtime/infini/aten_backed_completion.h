#pragma once

// InfiniOps' ATen-backed class of an operator its generator left abstract
// (it skipped an overload: Sub's deprecated in-place one, 49 classes at
// InfiniOps 1f6f9c2) cannot be made by InfiniOps' Make. The build completes
// it: the generated infini_completions.h (complete_abstract_aten_backed and
// render_completions in torch_infini/infiniops_binding.py) declares the class
// as libinfiniops defines it, read from the library's symbols, and derives a
// class of ours that overrides the skipped overloads with
// refuse_skipped_overload. No binding reaches those (their index 8 is not in
// the table); a call of a defined overload runs the library's code.
//
// Free of PyTorch and of InfiniOps' headers, so that the mechanism can be
// compiled against a stub InfiniOps in CI (tests/test_infiniops_binding.py).

#include <cstddef>
#include <memory>
#include <type_traits>

namespace torch_infini::runtime::infini {

[[noreturn]] void refuse_skipped_overload(const char* op);

// A completed class made for these arguments, as a `Base` (InfiniOps'
// Operator<Op>); null where it is still abstract (an overload the build
// could not declare) or has no such constructor, which the launch refuses.
template <typename Base, typename Made, typename... Args>
std::unique_ptr<Base> make_completed(const Args&... args) {
  if constexpr (!std::is_abstract_v<Made> &&
                std::is_constructible_v<Made, const Args&...>) {
    return std::make_unique<Made>(args...);
  } else {
    return nullptr;
  }
}

// The completion of an operator whose classes InfiniOps' Make can make.
struct NotCompleted {
  static constexpr bool kCompleted = false;
  template <typename... Args>
  static std::nullptr_t make(int /*device_type*/, const Args&...) {
    return nullptr;
  }
};

}  // namespace torch_infini::runtime::infini
