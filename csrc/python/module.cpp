// torch_infini._C: the Python face of the extension. Thin bindings only; the
// behaviour lives in core/, ops/ and runtime/.

#include <c10/core/ScalarType.h>
#include <c10/core/Stream.h>
#include <pybind11/stl.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "core/InfiniAllocator.h"
#include "core/InfiniFunctions.h"
#include "core/InfiniGenerator.h"
#include "core/InfiniHooks.h"
#include "core/InfiniStream.h"
#include "ops/aten/aten_registry.h"
#include "ops/aten/backend_policy.h"
#include "ops/fallback/fallback.h"
#include "ops/fallback/fallback_policy.h"
#include "ops/nn/fused.h"
#include "ops/op_coverage.h"
#include "ops/sparse/sparse_coo.h"
#include "ops/sync_debug.h"
#include "runtime/cache_verification.h"
#include "runtime/device_trace.h"
#include "python/compile_bindings.h"
#include "python/decompose_bindings.h"
#include "python/distributed_bindings.h"
#include "python/graph_bindings.h"
#include "python/ipc_bindings.h"
#include "python/memory_bindings.h"
#include "python/operand_bindings.h"
#include "python/gil.h"
#include "runtime/aten_ops.h"
#include "runtime/implementation_preferences.h"
#include "runtime/kernels.h"
#include "runtime/runtime.h"
#include "runtime/selection.h"

#include <limits>

namespace py = pybind11;

namespace torch_infini {
namespace {

c10::Stream unpack_stream(int64_t stream_id, int64_t device_index) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(kInfini,
                                 static_cast<c10::DeviceIndex>(device_index)),
                     static_cast<c10::StreamId>(stream_id));
}

py::tuple pack_stream(const c10::Stream& s) {
  return py::make_tuple(s.id(), static_cast<int64_t>(s.device_index()),
                        static_cast<int64_t>(s.device_type()));
}

py::dict provider_info() {
  auto& p = runtime::provider();
  const auto& caps = p.capabilities();
  py::dict capabilities;
  capabilities["async_copy"] = caps.async_copy;
  capabilities["pinned_memory"] = caps.pinned_memory;
  capabilities["timed_events"] = caps.timed_events;
  capabilities["async_execution"] = caps.async_execution;
  capabilities["blocking_events"] = caps.blocking_events;
  capabilities["graphs"] = caps.graphs;
  capabilities["host_addressable"] = caps.host_addressable;
  capabilities["protected_memory"] = caps.protected_memory;
  capabilities["host_funcs"] = caps.host_funcs;
  capabilities["host_kernels"] = caps.host_kernels;
  py::dict info;
  info["provider"] = p.name();
  info["backend"] = p.backend();
  info["reason"] = runtime::selection_reason();
  info["device_count"] = p.device_count();
  info["capabilities"] = capabilities;
  info["caching_allocator"] = allocator::caching_enabled();
  return info;
}

py::list op_support() {
  py::list ops;
  for (const auto& s : runtime::kernels().support()) {
    py::dict d;
    d["op"] = s.op;
    py::list dtypes;
    for (auto t : s.dtypes) {
      // torch's names ("float32"), as the error messages use them.
      dtypes.append(std::string(c10::getDtypeNames(t).first));
    }
    d["dtypes"] = dtypes;
    d["alpha"] = s.alpha;
    d["broadcast"] = s.broadcast;
    d["strided"] = s.strided;
    d["kernel"] = s.kernel;
    ops.append(d);
  }
  return ops;
}

py::list coverage_entries() {
  py::list out;
  for (const auto& e : ops::coverage::snapshot()) {
    py::dict d;
    d["op"] = e.op;
    d["kind"] = ops::coverage::kind_name(e.kind);
    d["calls"] = e.calls;
    d["time_ms"] = static_cast<double>(e.nanoseconds) / 1e6;
    d["bool_calls"] = e.bool_calls;
    d["complex_calls"] = e.complex_calls;
    out.append(d);
  }
  return out;
}

py::dict stat_dict(const c10::CachingAllocator::StatArray& array) {
  static const char* names[] = {"all", "small_pool", "large_pool"};
  py::dict out;
  for (size_t i = 0; i < array.size(); ++i) {
    py::dict s;
    s["current"] = array[i].current;
    s["peak"] = array[i].peak;
    s["allocated"] = array[i].allocated;
    s["freed"] = array[i].freed;
    out[names[i]] = s;
  }
  return out;
}

py::dict memory_stats(int64_t device) {
  const auto st = allocator::stats(static_cast<c10::DeviceIndex>(device));
  py::dict d;
  d["allocation"] = stat_dict(st.allocation);
  d["segment"] = stat_dict(st.segment);
  d["active"] = stat_dict(st.active);
  d["inactive_split"] = stat_dict(st.inactive_split);
  d["allocated_bytes"] = stat_dict(st.allocated_bytes);
  d["reserved_bytes"] = stat_dict(st.reserved_bytes);
  d["active_bytes"] = stat_dict(st.active_bytes);
  d["inactive_split_bytes"] = stat_dict(st.inactive_split_bytes);
  d["requested_bytes"] = stat_dict(st.requested_bytes);
  d["num_alloc_retries"] = st.num_alloc_retries;
  d["num_ooms"] = st.num_ooms;
  d["num_device_alloc"] = st.num_device_alloc;
  d["num_device_free"] = st.num_device_free;
  d["num_sync_all_streams"] = st.num_sync_all_streams;
  return d;
}

// torch's name of the dtype of c10::ScalarType value `k`, or empty for a
// value torch names no dtype by (getDtypeNames raises for those).
std::string dtype_name(int k) {
  try {
    return std::string(c10::getDtypeNames(static_cast<c10::ScalarType>(k)).first);
  } catch (const c10::Error&) {
    return {};
  }
}

// A set of dtypes by name ("float32", as torch names them), as the
// implementation preferences keep it: bit k for the c10::ScalarType of
// value k.
uint64_t dtype_mask(const std::vector<std::string>& names) {
  uint64_t mask = 0;
  for (const std::string& name : names) {
    bool found = false;
    for (int k = 0; k < static_cast<int>(c10::ScalarType::NumOptions) && k < 64;
         ++k) {
      if (!name.empty() && dtype_name(k) == name) {
        mask |= uint64_t{1} << k;
        found = true;
      }
    }
    TORCH_CHECK(found, "implementation preference: '", name,
                "' is not a dtype name (float32, int64, ...)");
  }
  return mask;
}

std::vector<std::string> dtype_names(uint64_t mask) {
  std::vector<std::string> names;
  for (int k = 0; k < 64; ++k) {
    if ((mask >> k) & 1) {
      names.push_back(dtype_name(k));
    }
  }
  return names;
}

// _synchronize(device): torch.infini.synchronize's call (-1: the current
// device). A plain CPython function, not a pybind11 one: a loop of small
// synchronous ops makes one per op, and pybind11's dispatcher and integer
// caster were about 430 of its 2,070 instructions.
PyObject* synchronize(PyObject* /*self*/, PyObject* arg) {
  HANDLE_TH_ERRORS
  const long long d = PyLong_AsLongLong(arg);
  if (d == -1 && PyErr_Occurred() != nullptr) {
    return nullptr;
  }
  TORCH_CHECK(d >= -1 && d <= std::numeric_limits<c10::DeviceIndex>::max(),
              "invalid device index ", d);
  const auto device = resolve_device(static_cast<c10::DeviceIndex>(d));
  // Nothing to wait for (a loop of small synchronous ops): no GIL hand-off.
  if (!runtime::provider().device_synchronize_if_done(device)) {
    python::without_gil(
        [&] { runtime::provider().device_synchronize(device); });
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

PyMethodDef synchronize_def = {
    "_synchronize",
    reinterpret_cast<PyCFunction>(
        reinterpret_cast<void (*)()>(synchronize)),
    METH_O,
    "_synchronize(device): waits for every stream of an infini device (-1: "
    "the current one) and reports their pending errors."};

}  // namespace
}  // namespace torch_infini

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using namespace torch_infini;
  register_hooks();
  // After every static registration of the infini kernels, which it keeps.
  ops::register_generic_aten_kernels();
  ops::register_sparse_kernels();
  bind_compile(m);
  bind_decompositions(m);
  bind_distributed(m);
  bind_graphs(m);
  bind_ipc(m);
  bind_memory_history(m);

  m.def("_infini_stack_compiled", &runtime::infini_stack_compiled);
  m.def("_refuse_backend", &runtime::refuse_backend,
        "Makes the provider selection refuse an InfiniRT backend, with why "
        "(torch_infini/_aten_backed.py).");
  m.def("_backend_refusals", &runtime::backend_refusals);
  // How the Infini stack passes bool and complex operands (its tests).
  bind_operand_rules(m);
  // Which implementation kind is faster per backend, operator and size
  // (runtime/implementation_preferences.h): rows (backend, op, below,
  // "native" | "aten", dtype names it is limited to), set by
  // torch_infini/_implementations.py.
  m.def("_set_implementation_preferences",
        [](const std::vector<std::tuple<std::string, std::string, int64_t,
                                        std::string, std::vector<std::string>>>&
               rows) {
          std::vector<runtime::PreferenceRow> parsed;
          for (const auto& [backend, op, below, kind, dtypes] : rows) {
            TORCH_CHECK(kind == "native" || kind == "aten",
                        "implementation preference of ", op, " on ", backend,
                        ": '", kind, "' is neither 'native' nor 'aten'");
            parsed.push_back({backend, op, below,
                              kind == "aten"
                                  ? runtime::ImplementationKind::kAtenBacked
                                  : runtime::ImplementationKind::kNative,
                              dtype_mask(dtypes)});
          }
          runtime::set_implementation_preferences(std::move(parsed));
        });
  m.def("_implementation_preferences", [] {
    std::vector<std::tuple<std::string, std::string, int64_t, std::string,
                           std::vector<std::string>>>
        rows;
    for (const auto& row : runtime::implementation_preferences()) {
      rows.emplace_back(row.backend, row.op, row.below,
                        row.faster == runtime::ImplementationKind::kAtenBacked
                            ? "aten"
                            : "native",
                        dtype_names(row.dtypes));
    }
    return rows;
  });
  m.def("_is_in_bad_fork", &runtime::in_bad_fork);
  m.def("_get_sync_debug_mode", &ops::sync_debug_mode);
  m.def("_set_sync_debug_mode", &ops::set_sync_debug_mode);
  m.def("_cache_verification", [] {
    const auto counts = runtime::cache_verification_counts();
    py::dict d;
    d["enabled"] = runtime::verify_caches();
    d["verified"] = counts.verified;
    d["differences"] = counts.differences;
    py::dict by_cache;
    for (const auto& [cache, n] : counts.verified_by_cache) {
      by_cache[py::str(cache)] = n;
    }
    d["verified_by_cache"] = by_cache;
    return d;
  }, "TORCH_INFINI_VERIFY_CACHES: whether it is on, the cache hits "
     "recomputed and equal (in all, and by cache), and those that differed "
     "(each raised)");
  m.def("_provider_info", &provider_info,
        "Provider, backend, selection reason and capabilities.");
  m.def("_op_support", &op_support,
        "The support matrix of every operator the provider runs.");

  // The opt-in CPU fallback and the coverage record (torch_infini.fallback).
  m.def("_test_cpu_fallback_batch_norm",
        [](const at::Tensor& x, const at::Tensor& mean, const at::Tensor& var) {
          static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow(
              "aten::native_batch_norm", "");
          torch::jit::Stack stack{x, at::Tensor(), at::Tensor(), mean, var,
                                  true, 0.1, 1e-5};
          ops::run_on_cpu_for_test(op, &stack);
          return stack[0].toTensor();
        },
        "native_batch_norm through the CPU fallback's runner (a test hook).");
  m.def("_generic_aten_ops", [] {
    py::list out;
    for (const auto& entry : ops::generic_aten_entries()) {
      py::dict row;
      row["op"] = entry.name;
      row["sync_reason"] = entry.sync_reason;
      out.append(row);
    }
    return out;
  }, "The overloads the generic kernel serves, and why any synchronize.");
  m.def("_aten_op_families", [] {
    py::list out;
    for (const auto& family : runtime::aten_op_families()) {
      py::dict row;
      row["family"] = family.family;
      row["overloads"] = family.overloads;
      row["custom"] = family.custom;
      out.append(row);
    }
    return out;
  }, "The ATen operator families served through the generic kernel entry.");
  m.def("_fallback_enabled", &ops::fallback_policy::enabled);
  m.def("_fallback_set_enabled", &ops::fallback_policy::set_enabled);
  m.def("_fallback_set_allow", &ops::fallback_policy::set_allow_list);
  m.def("_fallback_set_deny", &ops::fallback_policy::set_deny_list);
  m.def("_fallback_allow_list", &ops::fallback_policy::allow_list);
  m.def("_fallback_deny_list", &ops::fallback_policy::deny_list);
  m.def("_coverage", &coverage_entries,
        "Every operator called on infini tensors: kind, calls, host time.");
  m.def("_coverage_reset", &ops::coverage::reset);
  m.def("_fused_kernel", &ops::run_fused_custom_op,
        "torch.ops.infini.<name> on the provider's fused kernel, or None "
        "where it has none for the call (torch_infini.fused_ops).");
  m.def("_coverage_start_recording", &ops::coverage::start_recording);
  m.def("_coverage_stop_recording", &ops::coverage::stop_recording);
  m.def("_coverage_recording", &ops::coverage::recording);
  m.def("_backend_policy_enforce", &ops::backend_policy::enforce,
        "Divert every call outside `served` (TORCH_INFINI_ENFORCE_BACKEND; "
        "torch_infini.backend_support.enforce).");
  m.def("_backend_policy_clear", &ops::backend_policy::clear);
  m.def("_backend_policy_target", &ops::backend_policy::target);

  m.def("_device_count",
        [] { return static_cast<int64_t>(checked_device_count()); });
  m.def("_current_device",
        [] { return static_cast<int64_t>(current_device()); });
  m.def("_set_device", [](int64_t d) {
    set_device(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_is_initialized", &is_initialized);
  m.def("_init", [] {
    runtime::provider();  // raises in a child forked after the runtime started
    check_device(current_device());
    mark_initialized();
  });
  m.def("_device_name", [](int64_t d) {
    check_device(static_cast<c10::DeviceIndex>(d));
    return runtime::provider().device_name(static_cast<int>(d));
  });
  m.def("_mem_get_info", [](int64_t d) {
    check_device(static_cast<c10::DeviceIndex>(d));
    size_t free = 0;
    size_t total = 0;
    runtime::provider().mem_get_info(static_cast<int>(d), &free, &total);
    return py::make_tuple(free, total);
  });
  m.attr("_synchronize") = py::reinterpret_steal<py::object>(
      PyCFunction_New(&synchronize_def, nullptr));

  // The default generator of a device as a torch.Generator (Python keeps
  // one object per device, see torch_infini/infini/random.py).
  m.def("_default_generator", [](int64_t d) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(
        default_generator(static_cast<c10::DeviceIndex>(d))));
  });

  // torch.infini.current_stream(d).synchronize() without the Stream object
  // (what a compiled graph's wrapper waits with before its C++ kernels).
  m.def("_synchronize_current_stream", [](int64_t d) {
    const c10::Stream s = current_stream(static_cast<c10::DeviceIndex>(d));
    python::without_gil([&] {
      runtime::provider().stream_synchronize(s.device_index(),
                                             native_stream(s));
    });
  });
  m.def("_current_stream", [](int64_t d) {
    return pack_stream(current_stream(static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_default_stream", [](int64_t d) {
    return pack_stream(default_stream(static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_stream_from_pool", [](int64_t priority, int64_t d) {
    return pack_stream(stream_from_pool(static_cast<int>(priority),
                                        static_cast<c10::DeviceIndex>(d)));
  });
  m.def("_set_stream", [](int64_t id, int64_t d) {
    // As torch.cuda.set_stream: the stream's device becomes current too.
    const c10::Stream s = unpack_stream(id, d);
    check_stream(s);
    set_device(s.device_index());
    set_current_stream(s);
  });
  m.def("_stream_priority", [](int64_t id, int64_t d) {
    return stream_priority(unpack_stream(id, d));
  });
  m.def("_stream_priority_range", [] {
    return py::make_tuple(kLowestStreamPriority, kHighestStreamPriority);
  });
  m.def("_kernel_threads", [] { return runtime::provider().kernel_threads(); });
  m.def("_test_enqueue_delay", [](int64_t id, int64_t d, double ms) {
    const c10::Stream s = unpack_stream(id, d);
    check_stream(s);
    return runtime::provider().enqueue_delay(s.device_index(),
                                             native_stream(s), ms);
  }, "Test hook: queue a host-side wait of `ms` on a stream.");
  m.def("_test_calls_run_at_once", [](int64_t id, int64_t d) {
    const c10::Stream s = unpack_stream(id, d);
    check_stream(s);
    return runtime::provider().calls_run_at_once(s.device_index(),
                                                 native_stream(s));
  }, "Test hook: how many calls queued on a stream ran at once instead.");
  m.def("_profiler_device_tracing", &profiler::tracing,
        "Whether a profiler is tracing device work (kernels and copies).");

  m.def("_event_elapsed_time", [](uintptr_t start, uintptr_t end, int64_t d) {
    return runtime::provider().event_elapsed_ms(
        resolve_device(static_cast<c10::DeviceIndex>(d)),
        reinterpret_cast<runtime::EventHandle>(start),
        reinterpret_cast<runtime::EventHandle>(end));
  });

  m.def("_memory_stats", &memory_stats);
  m.def("_empty_cache", [] { python::without_gil(&allocator::empty_cache); });
  m.def("_reset_peak_memory_stats", [](int64_t d) {
    allocator::reset_peak_stats(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_reset_accumulated_memory_stats", [](int64_t d) {
    allocator::reset_accumulated_stats(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_set_memory_fraction", [](double f, int64_t d) {
    allocator::set_memory_fraction(f, static_cast<c10::DeviceIndex>(d));
  });
}
