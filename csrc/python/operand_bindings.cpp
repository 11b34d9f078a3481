#include "python/operand_bindings.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <pybind11/stl.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>

#include <string>
#include <tuple>
#include <vector>

#include "runtime/bool_operands.h"
#include "runtime/complex_pairs.h"

namespace py = pybind11;

namespace torch_infini {
namespace {

const c10::FunctionSchema& schema_of(const std::string& name,
                                     const std::string& overload) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow(name.c_str(), overload.c_str())
      .schema();
}

// The call's arguments by index, as the overload's schema types them; a
// functional overload's results, appended past them, are tensors.
std::vector<c10::IValue> call_args(const c10::FunctionSchema& schema,
                                   const py::list& args) {
  std::vector<c10::IValue> values;
  const auto& arguments = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    const py::handle a = args[i];
    if (a.is_none()) {
      values.emplace_back();
    } else if (i < arguments.size()) {
      values.push_back(torch::jit::toIValue(a, arguments[i].type()));
    } else {
      values.emplace_back(a.cast<at::Tensor>());
    }
  }
  return values;
}

}  // namespace

void bind_operand_rules(py::module& m) {
  m.def("_bool_operands_table", [] {
    std::vector<std::tuple<std::string, int, bool>> table;
    for (const auto& op : runtime::bool_operands_table()) {
      table.emplace_back(op.name, op.non_promoting, op.counts);
    }
    return table;
  });
  m.def("_bool_operands_reason",
        [](const std::string& name, const std::string& overload,
           const py::list& args) {
          const auto& schema = schema_of(name, overload);
          std::vector<c10::IValue> values;
          for (const py::handle a : args) {
            if (py::isinstance<py::list>(a)) {  // Tensor?[] (index's indices)
              c10::List<std::optional<at::Tensor>> list;
              for (const py::handle e : a) {
                list.push_back(e.is_none() ? std::nullopt
                                           : std::optional<at::Tensor>(e.cast<at::Tensor>()));
              }
              values.emplace_back(list);
            } else {
              values.emplace_back(a.is_none() ? c10::IValue()
                                              : c10::IValue(a.cast<at::Tensor>()));
            }
          }
          return runtime::bool_operands_reason(schema, values);
        },
        "Why the stack cannot pass the call's bool operands as their bytes "
        "(by argument index: a tensor, a list of tensors or None, else "
        "None; a functional overload's results appended); empty where it "
        "can.");
  m.def("_complex_pairs_table", [] {
    std::vector<std::string> names;
    for (const auto& op : runtime::complex_pairs_table()) {
      names.emplace_back(op.name);
    }
    return names;
  });
  m.def("_complex_pairs_reason",
        [](const std::string& name, const std::string& overload,
           const py::list& args) {
          const auto& schema = schema_of(name, overload);
          return runtime::complex_pairs_reason(schema, call_args(schema, args));
        },
        "Why the stack cannot pass the call's complex tensors as pairs of "
        "their real dtype (every argument by index; a functional overload's "
        "results appended); empty where it can.");
  m.def("_complex_as_pairs",
        [](const std::string& name, const std::string& overload,
           const py::list& args) {
          const auto& schema = schema_of(name, overload);
          py::list out;
          for (const c10::IValue& v :
               runtime::complex_as_pairs(schema, call_args(schema, args))) {
            out.append(torch::jit::toPyObject(v));
          }
          return out;
        },
        "The call's arguments as the stack hands them to ATen: complex "
        "tensors as pairs of their real dtype, the others following.");
}

}  // namespace torch_infini
