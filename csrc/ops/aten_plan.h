#pragma once

// What the op-family kernel (ops/aten_kernel.cpp) and its metadata step
// (ops/aten_meta.cpp) share: how a registered overload is run, and a walk
// over a call's tensor arguments.

#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>

#include <optional>
#include <string>
#include <vector>

#include "runtime/aten_ops.h"

namespace torch_infini::ops {

// How one registered overload is run.
struct Plan {
  std::string name;  // "aten::mul.out"
  const runtime::AtenOpFamily* family = nullptr;
  std::vector<size_t> written;  // arguments it writes (self_, out=)
  // For a functional overload: its out= twin, which the provider runs into
  // the outputs allocated here; without one, the functional overload runs
  // and its results are copied into them.
  std::optional<c10::OperatorHandle> out_twin;
};

// f(tensor, argument index) for every tensor of `args`, list elements too.
template <typename F>
void for_each_tensor(c10::ArrayRef<c10::IValue> args, F&& f) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isTensor()) {
      f(args[i].toTensor(), i);
    } else if (args[i].isTensorList()) {
      for (const at::Tensor& t : args[i].toTensorList()) {
        f(t, i);
      }
    }
  }
}

}  // namespace torch_infini::ops
