#!/usr/bin/env bash
# ThreadSanitizer on the host runtime (csrc/runtime/host) and the device
# allocator (csrc/core/InfiniAllocator.cpp), with tools/sanitizers/
# tsan_runtime.cpp as the driver: no Python and no ATen kernels, so every
# thread and lock it sees is ours (libc10 is uninstrumented; its mutexes are
# pthread's, which TSan intercepts). Not run in CI.
#
#   tools/sanitizers/run_tsan.sh            # builds into /tmp/torch_infini_tsan, runs
#   SANITIZE=address,undefined tools/sanitizers/run_tsan.sh   # the same driver under ASan+UBSan
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${PYTHON:-python}"
TORCH="$("$PY" -c 'import os, torch; print(os.path.dirname(torch.__file__))')"
ABI="$("$PY" -c 'import torch; print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')"
SANITIZE="${SANITIZE:-thread}"
OUT="${OUT:-/tmp/torch_infini_tsan}"
mkdir -p "$OUT"
c++ -std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize="$SANITIZE" -D_GLIBCXX_USE_CXX11_ABI="$ABI" \
  -I"$ROOT/csrc" -I"$TORCH/include" -I"$TORCH/include/torch/csrc/api/include" \
  "$ROOT/tools/sanitizers/tsan_runtime.cpp" \
  "$ROOT/csrc/runtime/host/host_stream.cpp" "$ROOT/csrc/runtime/host/host_provider.cpp" \
  "$ROOT/csrc/runtime/env.cpp" "$ROOT/csrc/runtime/provider.cpp" \
  "$ROOT/csrc/core/InfiniAllocator.cpp" "$ROOT/csrc/core/InfiniFunctions.cpp" "$ROOT/csrc/core/InfiniStream.cpp" \
  -L"$TORCH/lib" -Wl,-rpath,"$TORCH/lib" -lc10 -ltorch_cpu -lpthread -o "$OUT/tsan_runtime"
# setarch -R: TSan's shadow memory needs the classic address-space layout.
TSAN_OPTIONS="${TSAN_OPTIONS:-halt_on_error=0 second_deadlock_stack=1}" \
  setarch "$(uname -m)" -R "$OUT/tsan_runtime"
