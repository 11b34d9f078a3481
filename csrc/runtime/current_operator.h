#pragma once

// The ATen operator the calling thread is running on infini, for messages
// that can only be written where the operator is not at hand (the memory
// protection mode's fault report). A pointer in thread-local storage:
// setting it costs one store.

namespace torch_infini::runtime {

// The innermost operator of the calling thread, or nullptr.
const char* current_operator();

// Names the calling thread's operator for a scope.
class OperatorScope {
 public:
  explicit OperatorScope(const char* name);
  ~OperatorScope();
  OperatorScope(const OperatorScope&) = delete;
  OperatorScope& operator=(const OperatorScope&) = delete;

 private:
  const char* outer_;
};

}  // namespace torch_infini::runtime
