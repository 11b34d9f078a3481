// In-place random fills (uniform_, normal_, random_, bernoulli_,
// exponential_, geometric_, log_normal_, cauchy_) and the operators ATen
// builds on them without a composite (bernoulli.out, normal with tensor
// arguments). rand, randn, randint, rand_like, bernoulli(p) and
// normal(mean, std, size) are ATen composites over empty and these.
//
// Every draw runs on the host with the infini generator's CPU state, see
// ops/random/host_random.h; arithmetic on device tensors (normal's mean and std)
// runs on the device after the draw, in the order the CPU kernel uses, so
// results equal the CPU's for the same seed.

#include <ATen/ExpandUtils.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/random/host_random.h"

namespace torch_infini::ops {
namespace {

using Gen = std::optional<at::Generator>;

at::Tensor& uniform_(at::Tensor& self, double from, double to, Gen gen) {
  host_random::fill("aten::uniform_", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.uniform_(from, to, g);
                    });
  return self;
}

at::Tensor& normal_(at::Tensor& self, double mean, double std, Gen gen) {
  host_random::fill("aten::normal_", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.normal_(mean, std, g);
                    });
  return self;
}

at::Tensor& random_from(at::Tensor& self, int64_t from,
                        std::optional<int64_t> to, Gen gen) {
  host_random::fill("aten::random_.from", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.random_(from, to, g);
                    });
  return self;
}

at::Tensor& random_to(at::Tensor& self, int64_t to, Gen gen) {
  host_random::fill("aten::random_.to", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.random_(to, g);
                    });
  return self;
}

at::Tensor& random_(at::Tensor& self, Gen gen) {
  host_random::fill("aten::random_", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.random_(g);
                    });
  return self;
}

at::Tensor& exponential_(at::Tensor& self, double lambd, Gen gen) {
  host_random::fill("aten::exponential_", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.exponential_(lambd, g);
                    });
  return self;
}

at::Tensor& geometric_(at::Tensor& self, double p, Gen gen) {
  host_random::fill("aten::geometric_", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.geometric_(p, g);
                    });
  return self;
}

at::Tensor& log_normal_(at::Tensor& self, double mean, double std, Gen gen) {
  host_random::fill("aten::log_normal_", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.log_normal_(mean, std, g);
                    });
  return self;
}

at::Tensor& cauchy_(at::Tensor& self, double median, double sigma, Gen gen) {
  host_random::fill("aten::cauchy_", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.cauchy_(median, sigma, g);
                    });
  return self;
}

at::Tensor& bernoulli_float(at::Tensor& self, double p, Gen gen) {
  host_random::fill("aten::bernoulli_.float", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.bernoulli_(p, g);
                    });
  return self;
}

// The probabilities are read on the host (the draw compares each uniform
// sample with its p): a synchronous copy of `p` when it is on the device.
at::Tensor& bernoulli_tensor(at::Tensor& self, const at::Tensor& p, Gen gen) {
  TORCH_CHECK(p.device().is_cpu() || p.device() == self.device(),
              "aten::bernoulli_: p is on ", p.device(), " but self is on ",
              self.device(), "; move p to ", self.device());
  if (self.numel() == 0) {
    return self;
  }
  const at::Tensor p_host = host_random::to_host(p);
  host_random::fill("aten::bernoulli_.Tensor", self, gen,
                    [&](at::Tensor& h, const at::Generator& g) {
                      h.bernoulli_(p_host, g);
                    });
  return self;
}

// As the CPU kernel: resize (not resize_as_, which would insist on equal
// dtypes), then draw with self's values as probabilities.
at::Tensor& bernoulli_out(const at::Tensor& self, Gen gen, at::Tensor& out) {
  check_same_infini_device("aten::bernoulli.out", self, out);
  out.resize_(self.sizes());
  return bernoulli_tensor(out, self, gen);
}

// normal(mean, std) with tensor arguments, as the CPU computes it: draw
// standard samples into the output, then scale and shift on the device.
void check_std_tensor(const at::Tensor& std) {
  TORCH_CHECK(!std.is_complex(),
              "normal expects standard deviation to be non-complex");
  // Read on the host, as CUDA reads std.min() back: a synchronous check.
  TORCH_CHECK(std.numel() == 0 ||
                  host_random::to_host(std).min().ge(0).item<bool>(),
              "normal expects all elements of std >= 0.0");
}

at::Tensor& normal_tensor_float_out(const at::Tensor& mean, double std,
                                    Gen gen, at::Tensor& out) {
  TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std);
  check_same_infini_device("aten::normal.Tensor_float_out", mean, out);
  const auto shape = at::infer_size(mean.sizes(), out.sizes());
  at::native::resize_output(out, shape);
  normal_(out, 0, std, gen);
  out.add_(mean);
  return out;
}

at::Tensor normal_tensor_float(const at::Tensor& mean, double std, Gen gen) {
  at::Tensor out = at::empty_like(mean, at::MemoryFormat::Contiguous);
  return normal_tensor_float_out(mean, std, gen, out);
}

at::Tensor& normal_float_tensor_out(double mean, const at::Tensor& std,
                                    Gen gen, at::Tensor& out) {
  check_same_infini_device("aten::normal.float_Tensor_out", std, out);
  check_std_tensor(std);
  const at::Tensor mean_tensor = at::full({}, mean, out.options());
  const auto shape = at::infer_size(mean_tensor.sizes(), std.sizes());
  at::native::resize_output(out, shape);
  normal_(out, 0, 1, gen);
  out.mul_(std).add_(mean_tensor);
  return out;
}

at::Tensor normal_float_tensor(double mean, const at::Tensor& std, Gen gen) {
  at::Tensor out = at::empty_like(std, at::MemoryFormat::Contiguous);
  return normal_float_tensor_out(mean, std, gen, out);
}

at::Tensor& normal_tensor_tensor_out(const at::Tensor& mean,
                                     const at::Tensor& std, Gen gen,
                                     at::Tensor& out) {
  check_same_infini_device("aten::normal.Tensor_Tensor_out", mean, std);
  check_same_infini_device("aten::normal.Tensor_Tensor_out", mean, out);
  check_std_tensor(std);
  const auto shape = at::infer_size(mean.sizes(), std.sizes());
  at::native::resize_output(out, shape);
  normal_(out, 0, 1, gen);
  out.mul_(std).add_(mean);
  return out;
}

at::Tensor normal_tensor_tensor(const at::Tensor& mean, const at::Tensor& std,
                                Gen gen) {
  at::Tensor out = at::empty({0}, mean.options(), at::MemoryFormat::Contiguous);
  return normal_tensor_tensor_out(mean, std, gen, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("uniform_", TORCH_FN(uniform_));
  m.impl("normal_", TORCH_FN(normal_));
  m.impl("random_.from", TORCH_FN(random_from));
  m.impl("random_.to", TORCH_FN(random_to));
  m.impl("random_", TORCH_FN(random_));
  m.impl("exponential_", TORCH_FN(exponential_));
  m.impl("geometric_", TORCH_FN(geometric_));
  m.impl("log_normal_", TORCH_FN(log_normal_));
  m.impl("cauchy_", TORCH_FN(cauchy_));
  m.impl("bernoulli_.float", TORCH_FN(bernoulli_float));
  m.impl("bernoulli_.Tensor", TORCH_FN(bernoulli_tensor));
  m.impl("bernoulli.out", TORCH_FN(bernoulli_out));
  m.impl("normal.Tensor_float", TORCH_FN(normal_tensor_float));
  m.impl("normal.Tensor_float_out", TORCH_FN(normal_tensor_float_out));
  m.impl("normal.float_Tensor", TORCH_FN(normal_float_tensor));
  m.impl("normal.float_Tensor_out", TORCH_FN(normal_float_tensor_out));
  m.impl("normal.Tensor_Tensor", TORCH_FN(normal_tensor_tensor));
  m.impl("normal.Tensor_Tensor_out", TORCH_FN(normal_tensor_tensor_out));
}

}  // namespace torch_infini::ops
