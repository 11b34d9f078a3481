#include "runtime/complex_pairs.h"

#include <ATen/core/Tensor.h>
#include <ATen/ops/view_as_real.h>
#include <ATen/record_function.h>
#include <c10/core/ScalarType.h>

#include <cstring>

#include "runtime/ivalue_tensors.h"

namespace torch_infini::runtime {

namespace {

std::string dtype_name(c10::ScalarType t) {
  return std::string(c10::getDtypeNames(t).first);
}

bool is_output(const c10::FunctionSchema& schema, size_t i) {
  const auto& arguments = schema.arguments();
  return i >= arguments.size() ||
      (arguments[i].alias_info() != nullptr && arguments[i].alias_info()->isWrite());
}

bool named(const std::vector<const char*>& names, const std::string& name) {
  for (const char* n : names) {
    if (name == n) {
      return true;
    }
  }
  return false;
}

std::string arg_name(const c10::FunctionSchema& schema, size_t i) {
  return i < schema.arguments().size() ? schema.arguments()[i].name() : "";
}

const ComplexPairsOp* find_op(const std::string& name) {
  for (const auto& entry : complex_pairs_table()) {
    if (name == entry.name) {
      return &entry;
    }
  }
  return nullptr;
}

// The rank the dimension argument counts in: the output's (stack's output
// has the new dimension), else the first complex tensor's.
int64_t output_rank(const c10::FunctionSchema& schema,
                    const std::vector<c10::IValue>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (is_output(schema, i) && args[i].isTensor() && args[i].toTensor().defined()) {
      return args[i].toTensor().dim();
    }
  }
  int64_t rank = -1;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    if (rank < 0 && t.defined() && t.is_complex()) {
      rank = t.dim();
    }
  });
  return rank;
}

// Whether `t` is one of the call's values (not an index or a condition).
bool is_value(const ComplexPairsOp& op, const std::string& name) {
  return !named(op.spread, name) && !named(op.kept, name) && !named(op.beside, name);
}

at::Tensor pairs_of(const at::Tensor& t) {
  return t.defined() && t.is_complex() ? at::view_as_real(t) : t;
}

}  // namespace

const std::vector<ComplexPairsOp>& complex_pairs_table() {
  // Each moves, selects or copies whole elements: on the pairs it moves both
  // parts of each element together, and nothing is computed on them.
  static const std::vector<ComplexPairsOp> table = {
      {"aten::where", nullptr, false, {}, {}, {"condition"}, {}},
      {"aten::cat", "dim", false, {}, {}, {}, {}},
      {"aten::stack", "dim", false, {}, {}, {}, {}},
      {"aten::index_select", "dim", false, {}, {"index"}, {}, {}},
      {"aten::index_copy", "dim", false, {}, {"index"}, {}, {}},
      {"aten::narrow_copy", "dim", false, {}, {}, {}, {}},
      {"aten::gather", "dim", false, {"index"}, {}, {}, {}},
      {"aten::take_along_dim", "dim", true, {"indices"}, {}, {}, {}},
      {"aten::scatter", "dim", false, {"index"}, {}, {}, {"value", "reduce"}},
  };
  return table;
}

bool has_complex_tensor(const std::vector<c10::IValue>& args) {
  bool found = false;
  for_each_tensor(args, [&](const at::Tensor& t, size_t) {
    found = found || (t.defined() && t.is_complex());
  });
  return found;
}

std::string complex_pairs_reason(const c10::FunctionSchema& schema,
                                 const std::vector<c10::IValue>& args) {
  if (!has_complex_tensor(args)) {
    return {};
  }
  const std::string& name = schema.name();
  const ComplexPairsOp* op = find_op(name);
  if (op == nullptr) {
    return "ATen's " + name + " is not one of the operators that compute on "
        "complex values' pairs as on the values";
  }
  for (const char* refused : op->refused) {
    if (schema.argumentIndexWithName(refused).has_value()) {
      return std::string("ATen's ") + name + " with '" + refused +
          "' computes on the values or fills them from a Scalar, which their "
          "pairs would not do alike";
    }
  }
  c10::ScalarType dtype = c10::ScalarType::Undefined;
  std::string reason;
  for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
    if (!reason.empty() || !t.defined() || !is_value(*op, arg_name(schema, i))) {
      return;
    }
    if (!t.is_complex()) {
      reason = "ATen's " + name + " promotes a " +
          dtype_name(t.scalar_type()) + " tensor with complex "
          "ones, which their pairs would not do";
    } else if (dtype != c10::ScalarType::Undefined && t.scalar_type() != dtype) {
      reason = "ATen's " + name + " promotes " + dtype_name(dtype) +
          " with " + dtype_name(t.scalar_type()) + ", which their pairs "
          "would not do";
    } else if (t.is_conj() || t.is_neg()) {
      reason = std::string("a complex operand is a ") +
          (t.is_conj() ? "conjugated" : "negated") + " view, whose memory "
          "holds the values before that bit is applied";
    }
    dtype = t.is_complex() ? t.scalar_type() : dtype;
  });
  if (!reason.empty()) {
    return reason;
  }
  if (op->dim != nullptr) {
    const auto index = schema.argumentIndexWithName(op->dim);
    if (index.has_value() && static_cast<size_t>(*index) < args.size() &&
        args[*index].isNone() && op->dim_required) {
      return "ATen's " + name + " without '" + op->dim + "' flattens its "
          "input, which would take the pairs' parts apart";
    }
    if (output_rank(schema, args) < 1) {
      return "ATen's " + name + " on a 0-dim complex tensor: '" + op->dim +
          "' would count the pairs' dimension";
    }
  }
  if (name == "aten::cat" && output_rank(schema, args) != 1) {
    // cat skips 1-D empty inputs of any length; their pairs are 2-D.
    for_each_tensor(args, [&](const at::Tensor& t, size_t i) {
      if (reason.empty() && !is_output(schema, i) && t.defined() &&
          t.dim() == 1 && t.numel() == 0) {
        reason = "ATen's cat skips a 1-D empty input, whose pairs are 2-D";
      }
    });
  }
  return reason;
}

std::vector<c10::IValue> complex_as_pairs(const c10::FunctionSchema& schema,
                                          const std::vector<c10::IValue>& args) {
  const ComplexPairsOp* op = find_op(schema.name());
  TORCH_INTERNAL_ASSERT(op != nullptr, "complex_as_pairs: ", schema.name(),
                        " is not in the table");
  // Views made for the call, not calls the program made: the profiler and
  // the coverage record do not see them.
  at::DisableRecordFunctionGuard not_a_call;
  const int64_t rank = output_rank(schema, args);
  std::vector<c10::IValue> out;
  out.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string name = arg_name(schema, i);
    const c10::IValue& v = args[i];
    if (op->dim != nullptr && name == op->dim && v.isInt()) {
      const int64_t d = v.toInt();
      out.emplace_back(d < 0 ? d + rank : d);
    } else if (v.isTensor() && v.toTensor().defined() && named(op->spread, name)) {
      const at::Tensor& t = v.toTensor();
      std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end());
      sizes.push_back(2);
      out.emplace_back(t.unsqueeze(-1).expand(sizes));
    } else if (v.isTensor() && v.toTensor().defined() && named(op->beside, name)) {
      out.emplace_back(v.toTensor().unsqueeze(-1));
    } else if (v.isTensor()) {
      out.emplace_back(pairs_of(v.toTensor()));
    } else if (v.isTensorList()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor& t : v.toTensorList()) {
        list.push_back(pairs_of(t));
      }
      out.emplace_back(std::move(list));
    } else {
      out.push_back(v);
    }
  }
  return out;
}

bool complex_pairs_operator(const std::string& name) {
  return find_op(name) != nullptr;
}

std::string missing_datatype(c10::ScalarType t) {
  using c10::ScalarType;
  const std::string name = dtype_name(t);
  switch (t) {
    case ScalarType::Float: case ScalarType::Half: case ScalarType::BFloat16:
    case ScalarType::Double: case ScalarType::Char: case ScalarType::Short:
    case ScalarType::Int: case ScalarType::Long: case ScalarType::Byte:
      return {};
    case ScalarType::UInt16:
    case ScalarType::UInt32:
    case ScalarType::UInt64:
      return "torch-infini does not pass " + name + " tensors to InfiniOps";
    default:
      return "InfiniRT has no " + name + " DataType";
  }
}

}  // namespace torch_infini::runtime
