#pragma once

// torch.infini.set_sync_debug_mode, as torch.cuda's: warn about, or refuse,
// the operations that make the host wait for the device where CUDA's would
// (a blocking copy to or from the host, .item(), an operator whose result's
// shape depends on the data). torch-infini's own waits (the host runtime's
// first call of a kind) are not the program's, and are not reported.

#include <cstdint>

namespace torch_infini::ops {

// 0: nothing (the default); 1: a warning; 2: an error.
int64_t sync_debug_mode();
void set_sync_debug_mode(int64_t mode);

// Reports a synchronizing operation (`what` names it) under the mode.
void check_sync(const char* what);

// torch-infini's own waits on this thread, while it lives: not reported
// (a CPU scalar's one-time copy to the device, which CUDA passes to its
// kernel as an argument instead).
class OwnSync {
 public:
  OwnSync();
  ~OwnSync();
  OwnSync(const OwnSync&) = delete;
  OwnSync& operator=(const OwnSync&) = delete;
};

}  // namespace torch_infini::ops
