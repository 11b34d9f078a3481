#include "python/graph_bindings.h"

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <utility>

#include "core/InfiniFunctions.h"
#include "core/InfiniGraph.h"
#include "core/InfiniStream.h"
#include "python/gil.h"

namespace torch_infini {
namespace {

namespace py = pybind11;

GraphCaptureMode parse_mode(const std::string& mode) {
  if (mode == "global") {
    return GraphCaptureMode::Global;
  }
  if (mode == "thread_local") {
    return GraphCaptureMode::ThreadLocal;
  }
  if (mode == "relaxed") {
    return GraphCaptureMode::Relaxed;
  }
  TORCH_CHECK(mode == "default", "capture_error_mode must be \"global\", "
              "\"thread_local\" or \"relaxed\", got \"", mode, "\"");
  return GraphCaptureMode::Default;
}

}  // namespace

void bind_graphs(py::module& m) {
  py::class_<InfiniGraph>(m, "_InfiniGraph")
      .def(py::init([](bool keep_graph) {
             GraphArgs args;
             args.keep_graph = keep_graph;
             return std::make_unique<InfiniGraph>(args);
           }),
           py::arg("keep_graph") = false)
      .def(
          "capture_begin",
          [](InfiniGraph& g, std::optional<c10::MempoolId_t> pool,
             const std::string& mode) {
            g.capture_begin(pool.value_or(c10::MempoolId_t{0, 0}),
                            parse_mode(mode));
          },
          py::arg("pool") = std::nullopt,
          py::arg("capture_error_mode") = "global")
      .def("capture_end", &InfiniGraph::capture_end)
      .def("instantiate", &InfiniGraph::instantiate)
      // Replay may wait on a full queue: without the GIL, so the workers'
      // Python-free tasks and other threads go on.
      .def("replay",
           [](InfiniGraph& g) { python::without_gil([&] { g.replay(); }); })
      .def("reset", &InfiniGraph::reset)
      .def("pool", &InfiniGraph::pool)
      .def("enable_debug_mode", &InfiniGraph::enable_debug_mode)
      .def("debug_dump", &InfiniGraph::debug_dump, py::arg("debug_path"));

  m.def("_graph_pool_handle", &graph_pool_handle,
        "A new id of a graph memory pool that graphs may share.");
  m.def(
      "_is_current_stream_capturing",
      [] {
        if (!capture_underway()) {
          return false;  // without touching (or initializing) the device
        }
        return is_stream_capturing(current_stream(current_device()));
      },
      "Whether graph capture is underway on the current infini stream.");
}

}  // namespace torch_infini
