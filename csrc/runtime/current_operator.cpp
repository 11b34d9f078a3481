#include "runtime/current_operator.h"

namespace torch_infini::runtime {
namespace {

thread_local const char* tls_operator = nullptr;

}  // namespace

const char* current_operator() { return tls_operator; }

OperatorScope::OperatorScope(const char* name) : outer_(tls_operator) {
  tls_operator = name;
}

OperatorScope::~OperatorScope() { tls_operator = outer_; }

}  // namespace torch_infini::runtime
