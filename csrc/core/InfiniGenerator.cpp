#include "core/InfiniGenerator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <c10/core/DispatchKeySet.h>
#include <c10/util/Exception.h>
#include <c10/util/irange.h>

#include <memory>
#include <mutex>
#include <vector>

#include "core/InfiniFunctions.h"
#include "runtime/runtime.h"

namespace torch_infini {
namespace {

at::CPUGeneratorImpl* cpu_impl(const at::Generator& g) {
  return g.get<at::CPUGeneratorImpl>();
}

// A forked child has no stream workers or device context: like torch.cuda,
// it must not touch the device, and its generators are part of the device.
void check_not_in_bad_fork() {
  TORCH_CHECK(!runtime::in_bad_fork(),
              "Cannot re-initialize infini in forked subprocess. To use "
              "infini with multiprocessing, you must use the 'spawn' start "
              "method");
}

}  // namespace

InfiniGeneratorImpl::InfiniGeneratorImpl(c10::DeviceIndex device,
                                         uint64_t seed)
    : c10::GeneratorImpl(c10::Device(kInfini, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      host_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

c10::DeviceType InfiniGeneratorImpl::device_type() {
  return kInfini;
}

void InfiniGeneratorImpl::set_current_seed(uint64_t seed) {
  cpu_impl(host_)->set_current_seed(seed);
}

uint64_t InfiniGeneratorImpl::current_seed() const {
  return cpu_impl(host_)->current_seed();
}

uint64_t InfiniGeneratorImpl::seed() {
  return cpu_impl(host_)->seed();
}

void InfiniGeneratorImpl::set_offset(uint64_t /*offset*/) {
  TORCH_CHECK(false,
              "infini generators have no Philox offset (their state is a "
              "CPU mt19937 state); use get_state() and set_state()");
}

uint64_t InfiniGeneratorImpl::get_offset() const {
  TORCH_CHECK(false,
              "infini generators have no Philox offset (their state is a "
              "CPU mt19937 state); use get_state() and set_state()");
}

void InfiniGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  // The CPU generator validates the size and layout of the byte state.
  cpu_impl(host_)->set_state(new_state);
}

c10::intrusive_ptr<c10::TensorImpl> InfiniGeneratorImpl::get_state() const {
  return cpu_impl(host_)->get_state();
}

InfiniGeneratorImpl* InfiniGeneratorImpl::clone_impl() const {
  // GeneratorImpl::clone() takes ownership of the returned pointer.
  auto copy = std::make_unique<InfiniGeneratorImpl>(device().index(),
                                                    current_seed());
  copy->host_ = host_.clone();
  return copy.release();
}

const at::Generator& default_generator(c10::DeviceIndex device) {
  check_not_in_bad_fork();
  const c10::DeviceIndex index = resolve_device(device);
  // One slot per device, each created once; the vector itself is built once
  // (device_count() is fixed for the process) and leaked, like ATen's own
  // default generators, so it outlives every static that may still use it.
  struct Slots {
    explicit Slots(size_t count) : once(count), generators(count) {}
    std::vector<std::once_flag> once;
    std::vector<at::Generator> generators;
  };
  static Slots& slots =
      *std::make_unique<Slots>(static_cast<size_t>(device_count())).release();
  std::call_once(slots.once[index], [index] {
    at::Generator g = new_generator(index);
    // As CUDA's default generators: a non-deterministic seed until
    // torch.manual_seed (or torch.infini.manual_seed*) sets one.
    g.seed();
    slots.generators[index] = std::move(g);
  });
  return slots.generators[index];
}

at::Generator new_generator(c10::DeviceIndex device) {
  check_not_in_bad_fork();
  const c10::DeviceIndex index = resolve_device(device);
  return at::make_generator<InfiniGeneratorImpl>(index,
                                                 c10::default_rng_seed_val);
}

}  // namespace torch_infini
