#include "python/decompose_bindings.h"

#include <ATen/ScalarOps.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/csrc/utils/tensor_memoryformats.h>

#include <string>
#include <utility>
#include <unordered_set>
#include <vector>

#include "ops/aten/aten_decompose.h"
#include "ops/aten/aten_kernel.h"
#include "runtime/kernels.h"

namespace py = pybind11;

namespace torch_infini {
namespace {

// run(name, args, kwargs): the overload's results, NotImplemented where it
// has no decomposition, `declined` where its decomposition declines these
// arguments, NotImplementedError where one it calls is not served. Strong
// references, kept for the life of the process: they are never released,
// since the interpreter may be gone before static destruction.
PyObject* runner = nullptr;
PyObject* declined = nullptr;

// Overloads the runner has no decomposition for, learned from it (read and
// written with the GIL held): not converted and asked again.
std::unordered_set<std::string> without;

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

// `value` as the dispatcher had it for a Tensor argument: a Python number
// there was a wrapped-number tensor, which Python kernels and modes are
// shown as the number.
py::object as_dispatched(const py::handle value, const c10::Argument& argument) {
  c10::TypePtr type = argument.real_type();
  if (const auto* optional = type->castRaw<c10::OptionalType>()) {
    type = optional->getElementType();
  }
  if (type->kind() != c10::TypeKind::TensorType ||
      THPVariable_Check(value.ptr()) || value.is_none()) {
    return py::reinterpret_borrow<py::object>(value);
  }
  // (A bool first: to NumberType it would be an int, of another dtype.)
  const c10::Scalar number = PyBool_Check(value.ptr())
      ? c10::Scalar(value.cast<bool>())
      : torch::jit::toIValue(value, c10::NumberType::get()).toScalar();
  return py::reinterpret_steal<py::object>(
      THPVariable_Wrap(at::native::wrapped_scalar_tensor(number)));
}

// The calls the runner recorded, [(overload, args, kwargs, out), ...], as
// the dispatcher had them.
void convert_recorded_calls(const py::list& calls, ops::Recording* recording) {
  for (const py::handle call : calls) {
    const py::tuple parts = call.cast<py::tuple>();
    const py::object overload = parts[0];
    const py::object schema_object = overload.attr("_schema");
    const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
        schema_object.attr("name").cast<std::string>().c_str(),
        schema_object.attr("overload_name").cast<std::string>().c_str());
    const auto& schema = op.schema();
    const py::tuple given = parts[1].cast<py::tuple>();
    py::tuple positional(given.size());
    for (size_t i = 0; i < given.size(); ++i) {
      positional[i] = i < schema.arguments().size()
          ? as_dispatched(given[i], schema.arguments()[i])
          : py::reinterpret_borrow<py::object>(given[i]);
    }
    py::kwargs keywords;
    for (const auto& [key, value] : parts[2].cast<py::dict>()) {
      const auto index = schema.argumentIndexWithName(key.cast<std::string>());
      keywords[key] = index ? as_dispatched(value, schema.arguments()[*index])
                            : py::reinterpret_borrow<py::object>(value);
    }
    torch::jit::Stack arguments = torch::jit::createStackForSchema(
        schema, torch::jit::tuple_slice(positional), keywords, std::nullopt);
    std::vector<c10::IValue> returns;
    const auto& types = schema.returns();
    if (types.size() == 1) {
      returns.push_back(torch::jit::toIValue(parts[3], types[0].real_type()));
    } else if (!types.empty()) {
      const py::sequence items = parts[3].cast<py::sequence>();
      for (size_t i = 0; i < types.size() && i < items.size(); ++i) {
        returns.push_back(torch::jit::toIValue(items[i], types[i].real_type()));
      }
    }
    recording->calls.push_back({op, std::move(arguments), std::move(returns)});
  }
}

bool run_decomposition(const c10::OperatorHandle& op, torch::jit::Stack* stack,
                       std::string* refusal, ops::Recording* recording) {
  const auto& schema = op.schema();
  const size_t nargs = schema.arguments().size();
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
        name, py::tuple(positional), keywords, recording != nullptr);
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
  if (recording != nullptr && !result.is(py::handle(Py_NotImplemented)) &&
      !result.is(py::handle(declined))) {
    // (result, calls, why they may not be replayed)
    const py::tuple recorded = result.cast<py::tuple>();
    result = recorded[0];
    recording->not_replayable = recorded[2].cast<std::string>();
    if (recording->not_replayable.empty()) {
      try {
        convert_recorded_calls(recorded[1].cast<py::list>(), recording);
      } catch (const std::exception& e) {  // the run stands; its replay not
        const std::string message = e.what();
        recording->calls.clear();
        recording->not_replayable = "its calls are not the dispatcher's (" +
            message.substr(0, message.find('\n')) + ")";
      }
    }
  }
  // None for the overload: not asked again. None for these arguments (a
  // decomposition of PyTorch's may say so itself: adaptive_max_pool's, for
  // sizes that do not divide): no refusal to remember either, since what
  // decided may be a size, which the refusals' key does not hold.
  if (result.is(py::handle(Py_NotImplemented))) {
    without.insert(name);
    return false;
  }
  if (result.is(py::handle(declined))) {
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
      [](const py::object& run, const py::object& declines) {
        PyObject* previous[] = {runner, declined};
        runner = run.inc_ref().ptr();
        declined = declines.inc_ref().ptr();
        for (PyObject* object : previous) {
          Py_XDECREF(object);
        }
        ops::set_decompose_hook(&run_decomposition);
      },
      "Installs run(name, args, kwargs, record), which runs PyTorch's "
      "decomposition of an overload the provider does not map "
      "(torch_infini.decompositions); with record, it returns (results, "
      "calls, why they may not be replayed). It returns `declined` where "
      "the decomposition declines the arguments.");
  m.def(
      "_forget_decomposition_runs",
      []() {
        ops::forget_decomposition_runs();
        without.clear();
      },
      "Forgets what was learned from the decompositions' Python code (it "
      "was replaced: torch_infini.decompositions' table): the recorded "
      "runs, the refusals they met, and which overloads have none.");
  m.def(
      "_provider_has_kernel",
      [](const std::string& name, const std::string& overload) {
        const auto op = c10::Dispatcher::singleton().findOp({name, overload});
        return op.has_value() && runtime::kernels().has_kernel(*op);
      },
      "Whether the provider runs overload (name, overload) on a kernel of "
      "its own, not as a decomposition: a decomposition choosing between "
      "two ways of computing a result asks it (fixed once the provider "
      "has started).");
  m.def("_decomposition_replayed_operators_of", &ops::replayed_operators_of,
        "The operators each replayable program of overload name calls, in "
        "order (tests, diagnostics).");
  m.def("_decomposition_replays_of", &ops::replays_of,
        "(replayable, [why not, ...]): how many decompositions of overload "
        "name (\"aten::trace\") were recorded for replay in this process, "
        "and why each other key's runs may not be replayed (tests, "
        "diagnostics).");
  m.def(
      "_decomposition_replay_counts",
      []() {
        const ops::ReplayCounts counts = ops::replay_counts();
        return py::make_tuple(counts.recorded, counts.replayed,
                              counts.not_replayable);
      },
      "(recorded, replayed, not replayable): decompositions recorded for "
      "replay, calls replayed from them, and first runs that may not be "
      "replayed, in this process (tests, diagnostics).");
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
