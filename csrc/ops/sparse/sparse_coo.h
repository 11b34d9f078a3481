#pragma once

// Sparse COO tensors on infini (ops/sparse/sparse_coo.cpp).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace torch_infini::ops {

// A sparse CPU tensor as a sparse tensor on `device`: its indices and values
// copied there, its coalesced flag kept (a CPU kernel's sparse result: an
// embedding bag's sparse gradient).
at::Tensor sparse_to_device(const at::Tensor& cpu, c10::Device device);

}  // namespace torch_infini::ops
