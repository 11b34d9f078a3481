#pragma once

// Sparse COO tensors on infini (ops/sparse/sparse_coo.cpp).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

namespace torch_infini::ops {

// A sparse CPU tensor as a sparse tensor on `device`: its indices and values
// copied there, its coalesced flag kept (a CPU kernel's sparse result: an
// embedding bag's sparse gradient).
at::Tensor sparse_to_device(const at::Tensor& cpu, c10::Device device);

// Registers CPU's way (run_on_cpu) for SparsePrivateUse1 on every operator
// with a SparseCPU kernel whose composite kernel would otherwise take a
// sparse infini tensor (clone, copy_: a composite works on strided memory);
// the others reach the key's fallback. After the static registrations.
void register_sparse_kernels();

}  // namespace torch_infini::ops
