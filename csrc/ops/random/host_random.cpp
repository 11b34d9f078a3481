#include "ops/random/host_random.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/strides.h>

#include "core/InfiniFunctions.h"
#include "core/InfiniGraph.h"
#include "core/InfiniHooks.h"
#include "runtime/runtime.h"

namespace torch_infini::ops::host_random {
namespace {

// Pinned memory is worth it only where a copy from it can be queued.
bool async_upload_possible() {
  const auto& caps = runtime::provider().capabilities();
  return caps.async_copy && caps.pinned_memory;
}

at::Tensor pinned_empty_strided(at::IntArrayRef sizes, at::IntArrayRef strides,
                                at::ScalarType dtype) {
  return at::detail::empty_strided_generic(
      sizes, strides, pinned_memory_hooks().allocator(),
      c10::DispatchKeySet(c10::DispatchKey::CPU), dtype);
}

at::Tensor staging_empty(at::IntArrayRef sizes, at::IntArrayRef strides,
                         at::ScalarType dtype) {
  if (async_upload_possible()) {
    return pinned_empty_strided(sizes, strides, dtype);
  }
  return at::empty_strided(sizes, strides, at::TensorOptions().dtype(dtype));
}

}  // namespace

InfiniGeneratorImpl* generator_for(const char* op,
                                   const std::optional<at::Generator>& gen,
                                   c10::DeviceIndex device) {
  check_capturable(op, device,
                   "random numbers are drawn on the host at the call, so "
                   "every replay would repeat them (a CUDA graph advances "
                   "its generator at each replay); draw them outside the "
                   "capture into a static tensor that the graph reads");
  if (gen.has_value() && gen->defined()) {
    TORCH_CHECK(gen->device().type() == kInfini, op,
                ": the tensor is on infini but the generator is on ",
                gen->device(),
                "; pass a generator made with torch.Generator(device='infini')");
    return at::check_generator<InfiniGeneratorImpl>(gen);
  }
  return at::check_generator<InfiniGeneratorImpl>(default_generator(device));
}

at::Tensor host_like(const at::Tensor& like) {
  // The CPU kernel visits a tensor in an order that depends on its strides
  // (and picks vectorized paths only for contiguous ones): drawing into a
  // host tensor with the same strides reproduces the CPU's numbers exactly.
  if (like.is_non_overlapping_and_dense()) {
    return staging_empty(like.sizes(), like.strides(), like.scalar_type());
  }
  // Gaps between elements (or overlap, which the CPU kernel then rejects as
  // it would on the CPU): pageable, repacked by upload().
  return at::empty_strided(like.sizes(), like.strides(),
                           at::TensorOptions().dtype(like.scalar_type()));
}

void upload(const at::Tensor& host, const at::Tensor& self) {
  c10::DeviceGuard guard(self.device());
  const int64_t n = self.numel();
  if (self.is_non_overlapping_and_dense()) {
    // Same strides on both sides: the memory spans match byte for byte, so
    // one flat copy moves every element to its place.
    self.as_strided({n}, {1}).copy_(host.as_strided({n}, {1}),
                                    /*non_blocking=*/true);
    return;
  }
  at::Tensor packed =
      staging_empty(self.sizes(), c10::contiguous_strides(self.sizes()),
                    self.scalar_type());
  packed.copy_(host);
  at::Tensor staged = at::empty(self.sizes(), self.options());
  staged.copy_(packed, /*non_blocking=*/true);
  self.copy_(staged);  // a strided copy on the device, queued
}

at::Tensor to_host(const at::Tensor& t) {
  return t.device().is_cpu() ? t : t.to(at::kCPU);
}

}  // namespace torch_infini::ops::host_random
