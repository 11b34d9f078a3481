#pragma once

// Boxed-argument helpers shared by the layers that rewrite a call's tensors
// (the host runtime's CPU aliases, the CPU fallback's host copies).

#include <ATen/core/Tensor.h>
#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>

#include <optional>

namespace torch_infini::runtime {

// f(tensor, argument index) for every tensor of `args`, list elements too
// (Tensor[] and Tensor?[]).
template <typename F>
void for_each_tensor(c10::ArrayRef<c10::IValue> args, F&& f) {
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isTensor()) {
      f(args[i].toTensor(), i);
    } else if (args[i].isTensorList()) {
      for (const at::Tensor& t : args[i].toTensorList()) {
        f(t, i);
      }
    } else if (args[i].isList()) {
      for (const c10::IValue& element : args[i].toListRef()) {
        if (element.isTensor()) {
          f(element.toTensor(), i);
        }
      }
    }
  }
}

// `value` with every tensor in it (a Tensor, a Tensor[] or a Tensor?[])
// replaced by f(tensor); any other value as it is.
template <typename F>
c10::IValue map_tensors(const c10::IValue& value, F&& f) {
  if (value.isTensor()) {
    return f(value.toTensor());
  }
  if (value.isTensorList()) {
    c10::List<at::Tensor> list;
    list.reserve(value.toTensorList().size());
    for (const at::Tensor& t : value.toTensorList()) {
      list.push_back(f(t));
    }
    return list;
  }
  if (value.isList() && value.toList().elementType()->kind() ==
                            c10::TypeKind::OptionalType) {  // Tensor?[]
    c10::List<std::optional<at::Tensor>> list;
    for (const c10::IValue& element : value.toListRef()) {
      list.push_back(element.isTensor()
                         ? std::optional<at::Tensor>(f(element.toTensor()))
                         : std::nullopt);
    }
    return list;
  }
  return value;
}

// Whether a schema argument is a Generator (or an optional one).
inline bool is_generator_argument(const c10::Argument& arg) {
  c10::TypePtr type = arg.real_type();
  if (const auto* optional = type->castRaw<c10::OptionalType>()) {
    type = optional->getElementType();
  }
  return type->kind() == c10::TypeKind::GeneratorType;
}

}  // namespace torch_infini::runtime
