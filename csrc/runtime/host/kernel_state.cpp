#include "runtime/host/kernel_state.h"

#include <c10/core/DispatchKeySet.h>

namespace torch_infini::runtime::host {

KernelThreadState::KernelThreadState()
    : keys_(c10::default_included_set, c10::default_excluded_set),
      state_(c10::AutogradState::get_tls_state()),
      grad_mode_(state_.get_grad_mode()),
      inference_mode_(state_.get_inference_mode()),
      fw_grad_mode_(state_.get_fw_grad_mode()) {
  if (at::hasThreadLocalCallbacks()) {  // a copy only under a profiler
    record_functions_.emplace(at::get_record_function_tls_());
    at::set_record_function_tls_(at::RecordFunctionTLS());
  }
  state_.set_grad_mode(true);
  state_.set_inference_mode(false);
  state_.set_fw_grad_mode(true);
}

KernelThreadState::~KernelThreadState() {
  if (record_functions_) {
    at::set_record_function_tls_(*record_functions_);
  }
  state_.set_grad_mode(grad_mode_);
  state_.set_inference_mode(inference_mode_);
  state_.set_fw_grad_mode(fw_grad_mode_);
}

}  // namespace torch_infini::runtime::host
