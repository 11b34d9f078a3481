#include "python/memory_bindings.h"

#include <pybind11/stl.h>
#include <torch/csrc/profiler/combined_traceback.h>
#include <torch/csrc/utils/pybind.h>

#include "core/InfiniMemoryHistory.h"

// From torch/csrc/profiler/python/combined_traceback.h (libtorch_python
// exports them), declared here because that header includes nlohmann/json,
// which PyTorch's wheels do not ship.
namespace torch {
TORCH_API std::vector<pybind11::object> py_symbolize(
    std::vector<CapturedTraceback*>& to_symbolize);
TORCH_PYTHON_API void freeDeadCapturedTracebackFrames();
TORCH_PYTHON_API void installCapturedTracebackPython();
}  // namespace torch

namespace torch_infini {
namespace {

namespace py = pybind11;
using allocator::Context;

// Stacks are symbolized together at the end (frames shared between them
// are looked up once): each dict that should get "frames" waits here.
struct PendingFrames {
  std::vector<torch::CapturedTraceback*> tracebacks;
  std::vector<py::dict> owners;

  void add(const py::dict& owner, const Context& context) {
    if (context == nullptr) {
      owner["frames"] = py::list();
      return;
    }
    tracebacks.push_back(torch::getCapturedTracebackFromContext(context));
    owners.push_back(owner);
  }

  void resolve() {
    const std::vector<py::object> frames = torch::py_symbolize(tracebacks);
    for (size_t i = 0; i < frames.size(); ++i) {
      owners[i]["frames"] = frames[i];
    }
  }
};

py::dict segment_dict(const allocator::SegmentSnapshot& seg,
                      PendingFrames& pending) {
  py::dict d;
  d["device"] = static_cast<int64_t>(seg.device);
  d["address"] = seg.address;
  d["total_size"] = seg.total_size;
  d["allocated_size"] = seg.allocated_size;
  d["active_size"] = seg.active_size;
  d["requested_size"] = seg.requested_size;
  d["stream"] = static_cast<int64_t>(seg.stream);
  d["segment_type"] = seg.is_small ? "small" : "large";
  d["segment_pool_id"] = py::make_tuple(seg.pool.first, seg.pool.second);
  d["is_expandable"] = false;
  pending.add(d, seg.context);
  py::list blocks;
  for (const auto& b : seg.blocks) {
    py::dict block;
    block["address"] = b.address;
    block["size"] = b.size;
    block["requested_size"] = b.requested_size;
    block["state"] = b.state;
    pending.add(block, b.context);
    blocks.append(block);
  }
  d["blocks"] = blocks;
  return d;
}

py::dict trace_dict(const allocator::TraceEntry& e, PendingFrames& pending) {
  py::dict d;
  d["action"] = allocator::action_name(e.action);
  d[e.action == allocator::TraceAction::kOom ? "device_free" : "addr"] = e.addr;
  d["size"] = e.size;
  d["stream"] = static_cast<int64_t>(e.stream);
  d["time_us"] = e.time_us;
  pending.add(d, e.context);
  return d;
}

}  // namespace

void bind_memory_history(py::module& m) {
  m.def(
      "_record_memory_history",
      [](std::optional<std::string> enabled, std::optional<std::string> context,
         const std::string& stacks, size_t max_entries, bool clear_history,
         const std::vector<std::string>& skip_actions) {
        const auto settings = allocator::parse_history_settings(
            enabled, context, stacks, max_entries, skip_actions);
        if (settings.context_state) {
          torch::installCapturedTracebackPython();  // with the GIL held
        }
        allocator::record_memory_history(settings, clear_history);
      },
      py::arg("enabled"), py::arg("context"), py::arg("stacks"),
      py::arg("max_entries"), py::arg("clear_history"),
      py::arg("skip_actions"));
  m.def("_memory_snapshot", [] {
    allocator::MemorySnapshot snap;
    {
      py::gil_scoped_release no_gil;  // the allocator's locks, not the GIL
      snap = allocator::snapshot();
    }
    PendingFrames pending;
    py::list segments;
    for (const auto& seg : snap.segments) {
      segments.append(segment_dict(seg, pending));
    }
    py::list traces;
    for (const auto& device : snap.device_traces) {
      py::list trace;
      for (const auto& e : device) {
        trace.append(trace_dict(e, pending));
      }
      traces.append(trace);
    }
    pending.resolve();
    torch::freeDeadCapturedTracebackFrames();
    py::dict result;
    result["segments"] = segments;
    result["device_traces"] = traces;
    return result;
  });
}

}  // namespace torch_infini
