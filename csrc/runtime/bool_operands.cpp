#include "runtime/bool_operands.h"

#include <c10/core/ScalarType.h>

#include <cstring>

namespace torch_infini::runtime {

namespace {

bool is_output(const c10::FunctionSchema& schema, size_t i) {
  const auto& arguments = schema.arguments();
  return i >= arguments.size() ||
      (arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite());
}

// Calls `f(tensor, argument index)` for every input tensor of the call.
template <typename F>
void each_input(const c10::FunctionSchema& schema,
                const std::vector<c10::IValue>& args, F f) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_output(schema, i)) {
      continue;
    }
    if (args[i].isTensor()) {
      f(args[i].toTensor(), i);
    } else if (args[i].isTensorList()) {
      for (const at::Tensor& t : args[i].toTensorList()) {
        f(t, i);
      }
    } else if (args[i].isList()) {  // Tensor?[]: index's indices
      for (const c10::IValue& e : args[i].toListRef()) {
        if (e.isTensor()) {
          f(e.toTensor(), i);
        }
      }
    }
  }
}

bool is_bool(const at::Tensor& t) {
  return t.defined() && t.scalar_type() == c10::ScalarType::Bool;
}

}  // namespace

const std::vector<BoolOperandsOp>& bool_operands_table() {
  // Why each reads bytes as bools: the logical operators and where's
  // condition test for nonzero; the comparisons, max/min and the bitwise
  // and/or/xor order and combine 0 and 1 as false and true; mul and prod of
  // 0s and 1s are 0 or 1; tril/triu, index_select and gather move bytes;
  // sum, nansum and cumsum count the 1s (their results are integers).
  static const std::vector<BoolOperandsOp> table = {
      {"aten::where", 0, false},         {"aten::logical_and", -1, false},
      {"aten::logical_or", -1, false},   {"aten::logical_xor", -1, false},
      {"aten::logical_not", -1, false},  {"aten::bitwise_and", -1, false},
      {"aten::bitwise_or", -1, false},   {"aten::bitwise_xor", -1, false},
      {"aten::eq", -1, false},           {"aten::ne", -1, false},
      {"aten::lt", -1, false},           {"aten::le", -1, false},
      {"aten::gt", -1, false},           {"aten::ge", -1, false},
      {"aten::mul", -1, false},          {"aten::prod", -1, false},
      {"aten::cumprod", -1, false},      {"aten::tril", -1, false},
      {"aten::triu", -1, false},         {"aten::amax", -1, false},
      {"aten::amin", -1, false},         {"aten::maximum", -1, false},
      {"aten::minimum", -1, false},      {"aten::max", -1, false},
      {"aten::min", -1, false},          {"aten::index_select", 2, false},
      {"aten::gather", 2, false},        {"aten::sum", -1, true},
      {"aten::nansum", -1, true},        {"aten::cumsum", -1, true},
  };
  return table;
}

bool has_bool_operand(const c10::FunctionSchema& schema,
                      const std::vector<c10::IValue>& args) {
  bool found = false;
  each_input(schema, args, [&](const at::Tensor& t, size_t) {
    found = found || is_bool(t);
  });
  return found;
}

std::string bool_operands_reason(const c10::FunctionSchema& schema,
                                 const std::vector<c10::IValue>& args) {
  if (!has_bool_operand(schema, args)) {
    return {};
  }
  const BoolOperandsOp* op = nullptr;
  for (const auto& entry : bool_operands_table()) {
    if (schema.name() == entry.name) {
      op = &entry;
      break;
    }
  }
  const std::string& name = schema.name();
  if (op == nullptr) {
    return "ATen's " + name + " computes on bool operands otherwise than "
        "on their bytes, or is not known to compute the same";
  }
  bool bool_promotes = false;
  bool integer_promotes = false;
  each_input(schema, args, [&](const at::Tensor& t, size_t i) {
    if (!t.defined() || static_cast<int>(i) == op->non_promoting) {
      return;
    }
    bool_promotes = bool_promotes || is_bool(t);
    integer_promotes = integer_promotes ||
        (!is_bool(t) && !c10::isFloatingType(t.scalar_type()));
  });
  if (bool_promotes && integer_promotes) {
    return "ATen's " + name + " promotes a bool operand with an integer one, "
        "and their bytes (uint8) would promote otherwise";
  }
  if (op->counts) {
    for (size_t i = 0; i < args.size(); ++i) {
      if (is_output(schema, i) && args[i].isTensor() && is_bool(args[i].toTensor())) {
        return "ATen's " + name + " counts true values, which a bool result "
            "holds as true and their bytes would not";
      }
    }
  }
  return {};
}

}  // namespace torch_infini::runtime
