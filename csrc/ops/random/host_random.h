#pragma once

// Random operators by host generation: the numbers are drawn on the host by
// PyTorch's CPU kernel, from the CPU state inside the infini generator
// (core/InfiniGenerator.h), into a host tensor laid out as the destination;
// then they are copied to the device on the current stream. So a seed gives
// the same numbers on every provider, equal to the CPU's, in the order the
// CPU kernel visits the destination's layout.
//
// The copy is queued without synchronizing when the provider copies
// asynchronously from pinned memory (the pinned block is kept until it has
// run); otherwise it completes before the operator returns, like every copy
// from pageable memory. The generator's lock is held only while drawing,
// never across a device call.

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/core/Tensor.h>

#include <mutex>
#include <optional>
#include <utility>

#include "core/InfiniGenerator.h"

namespace torch_infini::ops::host_random {

// The generator `op` draws from for a tensor on `device`: `gen` when given
// (it must be an infini generator), else the device's default generator.
InfiniGeneratorImpl* generator_for(const char* op,
                                   const std::optional<at::Generator>& gen,
                                   c10::DeviceIndex device);

// A CPU tensor with `like`'s sizes, strides and dtype, in pinned memory when
// the provider can copy from it asynchronously and `like` is dense.
at::Tensor host_like(const at::Tensor& like);

// Copies `host` (laid out as `host_like(self)` made it) into `self`, queued
// on the current stream of self's device.
void upload(const at::Tensor& host, const at::Tensor& self);

// A CPU copy of `t` (an infini or CPU tensor) for operators whose draw
// depends on input values (bernoulli's probabilities, multinomial's
// weights). Waits for the work that produces `t` on the current stream.
at::Tensor to_host(const at::Tensor& t);

// Fills `self` in place: `draw(host, cpu_generator)` runs on a host tensor
// laid out as `self`, under the generator's lock; the result is uploaded.
template <typename Draw>
const at::Tensor& fill(const char* op, const at::Tensor& self,
                       const std::optional<at::Generator>& gen, Draw&& draw) {
  if (self.numel() == 0) {
    // Nothing to draw, but CPU's checks still apply (torch.rand(0,
    // dtype=torch.int64) raises there): the draw runs on an empty CPU
    // tensor, from a throwaway generator, leaving the device's as it was.
    at::Tensor empty = at::empty_strided(
        self.sizes(), self.strides(),
        at::TensorOptions().dtype(self.scalar_type()));
    std::forward<Draw>(draw)(empty,
                             at::make_generator<at::CPUGeneratorImpl>());
    return self;
  }
  InfiniGeneratorImpl* impl = generator_for(op, gen, self.device().index());
  at::Tensor host = host_like(self);
  {
    std::lock_guard<std::mutex> lock(impl->mutex_);
    std::forward<Draw>(draw)(host, impl->host_generator());
  }
  upload(host, self);
  return self;
}

}  // namespace torch_infini::ops::host_random
