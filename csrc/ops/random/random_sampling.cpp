// Random sampling operators: randperm (torch.randperm reaches the device as
// randperm.generator_out), multinomial and native_dropout (what F.dropout and
// nn.Dropout call on the device in training).
//
// Draws run on the host with the infini generator's CPU state (see
// ops/random/host_random.h). multinomial reads its weights on the host (a
// synchronous copy), since every sample depends on them. native_dropout's
// output is input * mask * scale on the device.

#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/multinomial.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/randperm.h>
#include <torch/library.h>

#include <mutex>
#include <tuple>

#include "ops/common.h"
#include "ops/random/host_random.h"

namespace torch_infini::ops {
namespace {

using Gen = std::optional<at::Generator>;

at::Tensor& randperm_out(c10::SymInt n_sym, Gen gen, at::Tensor& out) {
  const int64_t n = n_sym.guard_int(__FILE__, __LINE__);
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  out.resize_({n});
  host_random::fill("aten::randperm.generator_out", out, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      at::randperm_out(h, n, g);
                    });
  return out;
}

at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples,
                            bool replacement, Gen gen, at::Tensor& out) {
  check_same_infini_device("aten::multinomial.out", self, out);
  InfiniGeneratorImpl* impl = host_random::generator_for(
      "aten::multinomial", gen, self.device().index());
  const at::Tensor weights = host_random::to_host(self);
  at::Tensor samples = at::empty({0}, weights.options().dtype(at::kLong));
  {
    // The CPU operator checks the arguments and draws (with replacement, or
    // without by the exponential trick) exactly as it would on the CPU.
    std::lock_guard<std::mutex> lock(impl->mutex_);
    at::multinomial_out(samples, weights, num_samples, replacement,
                        impl->host_generator());
  }
  at::native::resize_output(out, samples.sizes());
  if (out.numel() > 0) {
    at::Tensor staged = host_random::host_like(out);
    staged.copy_(samples);
    host_random::upload(staged, out);
  }
  return out;
}

at::Tensor multinomial(const at::Tensor& self, int64_t num_samples,
                       bool replacement, Gen gen) {
  at::Tensor out = at::empty({0}, self.options().dtype(at::kLong));
  return multinomial_out(self, num_samples, replacement, gen, out);
}

// As the CPU kernel: keep each element with probability 1 - p, scale the kept
// ones by 1 / (1 - p); the mask is returned as bool for the backward.
std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input,
                                                  double p,
                                                  std::optional<bool> train) {
  if (input.numel() == 0) {
    return {input, at::empty_like(input)};
  }
  if (train.has_value() && !*train) {
    return {input.clone(),
            at::ones_like(input, input.options().dtype(at::kBool))};
  }
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  const double keep = 1. - p;
  const double scale = keep == 0 ? 0. : 1. / keep;
  // The draw, and the bool mask made from it, both on the host: the mask is
  // uploaded once in each dtype instead of converted on the device.
  at::Tensor mask = at::empty_like(input);
  at::Tensor bool_mask = at::empty_like(input, input.options().dtype(at::kBool));
  InfiniGeneratorImpl* impl = host_random::generator_for(
      "aten::native_dropout", std::nullopt, input.device().index());
  at::Tensor host_mask = host_random::host_like(mask);
  {
    std::lock_guard<std::mutex> lock(impl->mutex_);
    host_mask.bernoulli_(keep, impl->host_generator());
  }
  at::Tensor host_bool = host_random::host_like(bool_mask);
  host_bool.copy_(host_mask);
  host_random::upload(host_mask, mask);
  host_random::upload(host_bool, bool_mask);
  at::Tensor output = input.mul(mask).mul_(scale);
  return {output, bool_mask};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("randperm.generator_out", TORCH_FN(randperm_out));
  m.impl("multinomial", TORCH_FN(multinomial));
  m.impl("multinomial.out", TORCH_FN(multinomial_out));
  m.impl("native_dropout", TORCH_FN(native_dropout));
}

}  // namespace torch_infini::ops
