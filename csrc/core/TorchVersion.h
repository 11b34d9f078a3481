#pragma once

// The PyTorch release this extension is compiled against, for the few places
// whose C++ API differs between the releases we support (2.11 to 2.15; the
// import guard in torch_infini/_guard.py names the same range). Each use says
// which release changed what, so the branch for a release can be dropped
// when that release stops being supported.

#include <torch/version.h>

// True when compiling against PyTorch major.minor or newer.
#define TORCH_INFINI_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||               \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
