#include "python/decompose_bindings.h"

#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/tensor_memoryformats.h>

#include <string>
#include <unordered_set>
#include <vector>

#include "ops/aten/aten_decompose.h"
#include "ops/aten/aten_kernel.h"

namespace py = pybind11;

namespace torch_infini {
namespace {

// run(name, args, kwargs): the overload's results, NotImplemented where it
// has no decomposition, NotImplementedError where one it calls is not
// served. A strong reference, kept for the life of the process: it is never
// released, since the interpreter may be gone before static destruction.
PyObject* runner = nullptr;

// `value` as Python has it: a dtype, layout or memory format argument is an
// int in the boxed stack, and a torch.dtype (...) to a Python function.
py::object to_python(const c10::IValue& value, const c10::TypePtr& type) {
  c10::TypePtr t = type;
  if (const auto* optional = t->castRaw<c10::OptionalType>()) {
    t = optional->getElementType();
  }
  if (value.isInt()) {
    if (t->kind() == c10::TypeKind::ScalarTypeType) {
      return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(
          torch::getTHPDtype(static_cast<at::ScalarType>(value.toInt()))));
    }
    if (t->kind() == c10::TypeKind::LayoutType) {
      return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(
          torch::getTHPLayout(static_cast<at::Layout>(value.toInt()))));
    }
    if (t->kind() == c10::TypeKind::MemoryFormatType) {  // a new reference
      return py::reinterpret_steal<py::object>(torch::utils::getTHPMemoryFormat(
          static_cast<at::MemoryFormat>(value.toInt())));
    }
  }
  return torch::jit::toPyObject(value);
}

bool run_decomposition(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                       std::string* refusal) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
  // Overloads the runner has no decomposition for, learned from it (read
  // and written with the GIL held): not converted and asked again.
  static std::unordered_set<std::string> without;
  const std::string name = c10::toString(op.operator_name());
  py::gil_scoped_acquire gil;
  if (runner == nullptr || without.count(name) != 0) {
    return false;
  }
  // The arguments as PyTorch hands them to Python kernels: keyword-only
  // ones by name, and neither those nor trailing positional ones where they
  // are their default (PrimTorch's references refuse an explicit
  // layout=None).
  const auto values = torch::jit::last(*stack, nargs);
  const auto is_default = [&](size_t i) {
    const auto& fallback = schema.arguments()[i].default_value();
    return fallback.has_value() && *fallback == values[i];
  };
  size_t positional_count = 0;
  for (size_t i = 0; i < nargs; ++i) {
    if (!schema.arguments()[i].kwarg_only() && !is_default(i)) {
      positional_count = i + 1;
    }
  }
  py::list positional;
  py::dict keywords;
  for (size_t i = 0; i < nargs; ++i) {
    const c10::Argument& argument = schema.arguments()[i];
    if (argument.kwarg_only()) {
      if (!is_default(i)) {
        keywords[py::str(argument.name())] =
            to_python(values[i], argument.real_type());
      }
    } else if (i < positional_count) {
      positional.append(to_python(values[i], argument.real_type()));
    }
  }
  py::object result;
  try {
    result = py::reinterpret_borrow<py::object>(runner)(
        name, py::tuple(positional), keywords);
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_NotImplementedError)) {
      const std::string message = py::str(e.value());
      *refusal = message.substr(0, message.find('\n'));
      return false;
    }
    e.restore();  // the decomposition's own error, with its Python type
    python_error error;
    error.persist();  // held by the exception while the GIL is released
    throw error;
  }
  if (result.is(py::handle(Py_NotImplemented))) {
    without.insert(name);
    return false;
  }
  const auto& returns = schema.returns();
  std::vector<c10::IValue> values_out;
  if (returns.size() == 1) {
    values_out.push_back(torch::jit::toIValue(result, returns[0].real_type()));
  } else if (!returns.empty()) {
    const py::sequence items = result.cast<py::sequence>();
    TORCH_CHECK(items.size() == returns.size(), "infini: the decomposition of ",
                op.operator_name(), " returned ", items.size(),
                " values where its schema has ", returns.size());
    for (size_t i = 0; i < returns.size(); ++i) {
      values_out.push_back(torch::jit::toIValue(items[i], returns[i].real_type()));
    }
  }
  torch::jit::drop(*stack, nargs);
  for (auto& value : values_out) {
    stack->push_back(std::move(value));
  }
  return true;
}

}  // namespace

void bind_decompositions(py::module& m) {
  m.def(
      "_set_decomposition_runner",
      [](const py::object& run) {
        PyObject* previous = runner;
        runner = run.inc_ref().ptr();
        Py_XDECREF(previous);
        ops::set_decompose_hook(&run_decomposition);
      },
      "Installs run(name, args, kwargs), which runs PyTorch's decomposition "
      "of an overload the provider does not map (torch_infini.decompositions).");
  for (const bool as_kernel : {false, true}) {
    m.def(
        as_kernel ? "_decompose_as_kernel_for_test" : "_decompose_for_test",
        [as_kernel](const std::string& name, const std::string& overload,
                    const py::args& args,
                    const py::kwargs& kwargs) -> py::object {
          const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
              name.c_str(), overload.c_str());
          torch::jit::Stack stack = torch::jit::createStackForSchema(
              op.schema(), torch::jit::tuple_slice(args), kwargs,
              std::nullopt);
          std::string refusal;
          bool ran = false;
          {
            py::gil_scoped_release no_gil;  // as an operator call has it
            ran = as_kernel ? ops::decompose_as_kernel(op, &stack, &refusal)
                            : ops::try_decompose(op, &stack, &refusal);
          }
          if (!ran) {
            return py::str(refusal);
          }
          return torch::jit::createPyObjectForStack(std::move(stack));
        },
        as_kernel
            ? "Runs the installed decomposition of overload (name, overload) "
              "as the generic kernel does for an overload its provider does "
              "not serve (results laid out as the meta run lays them out, "
              "CPU's errors), whatever the provider: its results, or the "
              "refusal it met as a str (tests)."
            : "Runs the installed decomposition of overload (name, overload) "
              "on the arguments through the kernels' hook, whatever the "
              "provider: its results, or the refusal it met as a str (tests).");
  }
}

}  // namespace torch_infini
