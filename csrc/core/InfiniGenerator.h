#pragma once

// Random number generators of the infini device.
//
// An infini generator holds exactly the state of PyTorch's CPU generator
// (mt19937 plus the cached normal samples) inside a CPU generator it owns.
// The stream of numbers is therefore defined by the generator, not by where
// a kernel runs: the random operators draw on the host from this state and
// copy the result to the device (ops/random/random_*.cpp), so every provider
// produces the same numbers, and they equal the CPU's for the same seed.
// get_state()/set_state() exchange the CPU generator's byte state.

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>

namespace torch_infini {

class InfiniGeneratorImpl final : public c10::GeneratorImpl {
 public:
  InfiniGeneratorImpl(c10::DeviceIndex device, uint64_t seed);
  ~InfiniGeneratorImpl() override = default;

  // What at::check_generator compares a generator's device type with.
  static c10::DeviceType device_type();

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  uint64_t seed() override;
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The CPU generator holding the state. Draw from it only while holding
  // this generator's mutex_, so that set_state/clone (which Python calls
  // under that mutex) never see a half-advanced state.
  const at::Generator& host_generator() const { return host_; }

 private:
  InfiniGeneratorImpl* clone_impl() const override;

  at::Generator host_;
};

// The default generator of `device` (-1: the current device), created on
// first use and seeded non-deterministically, as CUDA's are.
// torch.manual_seed reseeds it through torch.infini.manual_seed_all.
const at::Generator& default_generator(c10::DeviceIndex device = -1);

// A new generator for `device` (-1: the current device), as
// torch.Generator("infini") creates.
at::Generator new_generator(c10::DeviceIndex device = -1);

}  // namespace torch_infini
