// The Provider's graph entry points, for providers without stream capture:
// every call refuses, naming the provider, the backend and the way out.

#include <c10/util/Exception.h>

#include "runtime/runtime.h"

namespace torch_infini::runtime {
namespace {

[[noreturn]] void refuse(const Provider& p, const char* call) {
  TORCH_CHECK(false, call, ": graph capture is not supported on infini (",
              p.name(), "/", p.backend(),
              "): capabilities.graphs=no (the Infini stack captures only on "
              "InfiniRT backends with StreamBeginCapture/GraphLaunch, which "
              "this build or backend lacks); run the work eagerly, or use the "
              "host runtime (TORCH_INFINI_PROVIDER=host)");
}

}  // namespace

void Provider::stream_begin_capture(int /*device*/, StreamHandle /*stream*/,
                                    CaptureMode /*mode*/) {
  refuse(*this, "capture_begin");
}

GraphHandle Provider::stream_end_capture(int /*device*/,
                                         StreamHandle /*stream*/) {
  refuse(*this, "capture_end");
}

uint64_t Provider::stream_capture_id(int /*device*/,
                                     StreamHandle /*stream*/) {
  return 0;  // nothing is ever captured
}

void Provider::graph_launch(int /*device*/, GraphHandle /*graph*/,
                            StreamHandle /*stream*/) {
  refuse(*this, "replay");
}

void Provider::graph_destroy(int /*device*/, GraphHandle /*graph*/) {}

}  // namespace torch_infini::runtime
