// AOTInductor's model runner for infini packages: what
// torch._inductor.aoti_load_package (PyTorch's AOTIModelPackageLoader) makes
// for a package whose device key is "infini" (torch_infini/_aoti.py
// generates them).
//
// The runner is PyTorch's own (load the model library, run it through its
// C interface) with two differences:
// - the model container is created for the device "cpu": PyTorch's AOT
//   runtime headers, compiled into every model library, accept only cpu,
//   cuda, xpu and mps (parse_device_str in aoti_runtime/model_base.h). An
//   infini model keeps its constants on the host as a CPU model does, and
//   makes its infini tensors (buffers, constants folded onto infini) on
//   the current infini device through the C shim;
// - so a run happens on the package's device: the one named at load
//   (aoti_load_package(..., device_index=i)), else the current one.

#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner.h>

#include <memory>
#include <string>
#include <vector>

#include "core/InfiniFunctions.h"

namespace torch_infini {
namespace {

// "infini" or "infini:N", as the package loader names the device: N, or -1
// (the current device).
c10::DeviceIndex package_device(const std::string& device_str) {
  const c10::Device device(device_str);
  TORCH_CHECK(device.type() == kInfini,
              "infini's AOTInductor model runner was asked for a package on ",
              device_str);
  return device.has_index() ? device.index() : -1;
}

class InfiniAOTIModelRunner final
    : public torch::inductor::AOTIModelContainerRunner {
 public:
  InfiniAOTIModelRunner(const std::string& model_so_path, size_t num_models,
                        const std::string& device_str,
                        const std::string& bin_dir, bool run_single_threaded)
      : AOTIModelContainerRunner(model_so_path, num_models, "cpu", bin_dir,
                                 run_single_threaded),
        device_(package_device(device_str)) {}

 protected:
  std::vector<at::Tensor> run_impl(std::vector<AtenTensorHandle>& input_handles,
                                   void* stream_handle) override {
    c10::OptionalDeviceGuard guard;
    if (device_ >= 0) {
      guard.reset_device(c10::Device(kInfini, device_));
    }
    return AOTIModelContainerRunner::run_impl(input_handles, stream_handle);
  }

 private:
  c10::DeviceIndex device_;
};

std::unique_ptr<torch::inductor::AOTIModelContainerRunner> make_runner(
    const std::string& model_so_path, size_t num_models,
    const std::string& device_str, const std::string& bin_dir,
    const bool run_single_threaded) {
  return std::make_unique<InfiniAOTIModelRunner>(
      model_so_path, num_models, device_str, bin_dir, run_single_threaded);
}

const torch::inductor::RegisterAOTIModelRunner register_runner("infini",
                                                               &make_runner);

}  // namespace
}  // namespace torch_infini
