#include "runtime/host/host_aliases.h"

#include <iterator>

#include <c10/core/CPUAllocator.h>

#include "runtime/ivalue_tensors.h"

namespace torch_infini::runtime::host {
namespace {

// A CPU storage over `t`'s device memory. Resizable into host memory: a CPU
// out= kernel may use its output as scratch of another shape (see
// WrittenArgs in host_kernels.cpp).
c10::Storage storage_over(const TensorLayout& t) {
  return c10::Storage(
      c10::Storage::use_byte_size_t(), t.storage_nbytes,
      at::DataPtr(t.storage_data, t.storage_data, [](void*) {}, at::kCPU),
      c10::GetCPUAllocator(), /*resizable=*/true);
}

// `t` as a CPU tensor over `storage`. Built directly, not through the
// dispatcher: this runs per argument of every queued call.
at::Tensor alias_over(const TensorLayout& t, c10::Storage storage) {
  auto impl = c10::make_intrusive<c10::TensorImpl>(
      std::move(storage), c10::DispatchKeySet(c10::DispatchKey::CPU),
      t.dtype);
  impl->set_sizes_and_strides(t.sizes, t.strides, t.offset);
  at::Tensor alias(std::move(impl));
  alias._set_conj(t.conj);
  alias._set_neg(t.neg);
  return alias;
}

}  // namespace

TensorLayout TensorLayout::of(const at::Tensor& t) {
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  const c10::Storage& storage = impl->unsafe_storage();
  TensorLayout layout;
  layout.impl = impl;
  layout.storage = storage.unsafeGetStorageImpl();
  layout.storage_data = storage.mutable_data();
  layout.storage_nbytes = storage.nbytes();
  layout.sizes = impl->sizes();
  layout.strides = impl->strides();
  layout.offset = impl->storage_offset();
  layout.dtype = impl->dtype();
  layout.conj = impl->is_conj();
  layout.neg = impl->is_neg();
  return layout;
}

TensorSnapshot TensorSnapshot::of(const at::Tensor& t) {
  TensorSnapshot s;
  if (!t.defined() || t.device().is_cpu()) {
    s.kept = t;
    return s;
  }
  const TensorLayout layout = TensorLayout::of(t);
  s.impl = layout.impl;
  s.storage = layout.storage;
  s.storage_data = layout.storage_data;
  s.storage_nbytes = layout.storage_nbytes;
  s.sizes.assign(layout.sizes.begin(), layout.sizes.end());
  s.strides.assign(layout.strides.begin(), layout.strides.end());
  s.offset = layout.offset;
  s.dtype = layout.dtype;
  s.conj = layout.conj;
  s.neg = layout.neg;
  return s;
}

TensorLayout TensorSnapshot::layout() const {
  TensorLayout layout;
  layout.impl = impl;
  layout.storage = storage;
  layout.storage_data = storage_data;
  layout.storage_nbytes = storage_nbytes;
  layout.sizes = sizes;
  layout.strides = strides;
  layout.offset = offset;
  layout.dtype = dtype;
  layout.conj = conj;
  layout.neg = neg;
  return layout;
}

size_t AliasPool::place_of(const void* data) {
  // Device blocks lie at least 512 bytes apart (the allocator's rounding):
  // the bits above that, folded, spread a loop's few tensors.
  const auto address = reinterpret_cast<uintptr_t>(data);
  return ((address >> 9) ^ (address >> 13)) & (kSize - 1);
}

at::Tensor AliasPool::take(const TensorLayout& t) {
  const size_t first = place_of(t.storage_data);
  for (size_t k = 0; k < 2; ++k) {
    const Entry& entry = entries_[(first + k) & (kSize - 1)];
    const at::Tensor& alias = entry.alias;
    if (!alias.defined() || alias.use_count() != 1) {
      continue;
    }
    const c10::TensorImpl& impl = *alias.unsafeGetTensorImpl();
    const c10::Storage& storage = impl.unsafe_storage();
    if (storage.data() == t.storage_data &&
        storage.nbytes() == t.storage_nbytes && storage.use_count() == 1 &&
        impl.dtype() == t.dtype && impl.storage_offset() == t.offset &&
        impl.sizes() == t.sizes && impl.strides() == t.strides &&
        impl.key_set() == entry.keys &&
        impl.autograd_meta() == nullptr) {
      return alias;
    }
  }
  return at::Tensor();
}

void AliasPool::keep(const at::Tensor& alias) {
  const size_t first = place_of(alias.storage().data());
  // The first of the two places that nothing else uses, else the first.
  Entry* chosen = &entries_[first];
  for (size_t k = 0; k < 2; ++k) {
    Entry& entry = entries_[(first + k) & (kSize - 1)];
    if (!entry.alias.defined() || entry.alias.use_count() == 1) {
      chosen = &entry;
      break;
    }
  }
  chosen->alias = alias;
  chosen->keys = alias.key_set();
}

at::Tensor AliasPool::alias_of(const TensorLayout& t) {
  at::Tensor alias = take(t);
  if (!alias.defined()) {
    alias = alias_over(t, storage_over(t));
    keep(alias);
  }
  return alias;
}

AliasPool& thread_alias_pool() {
  thread_local AliasPool pool;
  return pool;
}

c10::IValue Aliases::convert(const c10::IValue& value) {
  if (value.isDevice() && !value.toDevice().is_cpu()) {
    return c10::Device(at::kCPU);  // a factory's device
  }
  return map_tensors(value, [this](const at::Tensor& t) { return of(t); });
}

torch::jit::Stack Aliases::convert_all(c10::ArrayRef<c10::IValue> values) {
  torch::jit::Stack stack;
  stack.reserve(values.size());
  for (const c10::IValue& value : values) {
    stack.push_back(convert(value));
  }
  return stack;
}

at::Tensor Aliases::of(const at::Tensor& t) {
  if (!t.defined() || t.device().is_cpu()) {
    return t;
  }
  return of(TensorLayout::of(t));
}

at::Tensor Aliases::of(const TensorSnapshot& t) {
  if (t.impl == nullptr) {
    return t.kept;
  }
  return of(t.layout());
}

at::Tensor Aliases::of(const TensorLayout& t) {
  // The same device tensor twice (mul.out(x, 2, out=x)): one alias, so that
  // the CPU kernel sees one tensor, as CPU's would (resizing its output
  // resizes its input too).
  for (const auto& [impl, alias] : tensors_) {
    if (impl == t.impl) {
      return alias;
    }
  }
  std::optional<c10::Storage>* slot = nullptr;
  for (auto& [impl, storage] : storages_) {
    if (impl == t.storage) {
      slot = &storage;
      break;
    }
  }
  if (slot == nullptr && pool_ != nullptr) {
    // A pooled alias has a storage of its own: it may stand for a device
    // storage this call has not met yet.
    at::Tensor reused = pool_->take(t);
    if (reused.defined()) {
      storages_.emplace_back(t.storage, reused.storage());
      tensors_.emplace_back(t.impl, reused);
      return reused;
    }
  }
  if (slot == nullptr) {
    storages_.emplace_back(t.storage, std::nullopt);
    slot = &storages_.back().second;
  }
  auto& storage = *slot;
  if (!storage) {
    storage = storage_over(t);
  }
  at::Tensor alias = alias_over(t, c10::Storage(*storage));
  if (pool_ != nullptr) {
    pool_->keep(alias);
  }
  tensors_.emplace_back(t.impl, alias);
  return alias;
}

QueuedArgs::QueuedArgs(torch::jit::Stack args,
                       c10::ArrayRef<at::Tensor> results)
    : values_(std::make_move_iterator(args.begin()),
              std::make_move_iterator(args.end())) {
  for (const at::Tensor& t : results) {
    results_.push_back(TensorSnapshot::of(t));
  }
  const auto device_tensor = [](const at::Tensor& t) {
    return t.defined() && !t.device().is_cpu();
  };
  for (size_t i = 0; i < values_.size(); ++i) {
    c10::IValue& value = values_[i];
    const auto first = static_cast<uint32_t>(tensors_.size());
    if (value.isTensor()) {
      if (!device_tensor(value.toTensor())) {
        continue;  // undefined, or a CPU scalar: kept in place
      }
      tensors_.push_back(TensorSnapshot::of(value.toTensor()));
      slots_.push_back({static_cast<uint32_t>(i), Kind::kTensor, first, 1});
    } else if (value.isTensorList()) {
      for (const at::Tensor& t : value.toTensorList()) {
        tensors_.push_back(TensorSnapshot::of(t));
      }
      slots_.push_back({static_cast<uint32_t>(i), Kind::kTensorList, first,
                        static_cast<uint32_t>(tensors_.size() - first)});
    } else if (value.isList() && value.toList().elementType()->kind() ==
                                     c10::TypeKind::OptionalType) {
      for (const c10::IValue& element : value.toListRef()) {
        TensorSnapshot s;
        if (element.isTensor()) {
          s = TensorSnapshot::of(element.toTensor());
        } else {
          s.none = true;
        }
        tensors_.push_back(std::move(s));
      }
      slots_.push_back({static_cast<uint32_t>(i), Kind::kOptionalTensorList,
                        first, static_cast<uint32_t>(tensors_.size() - first)});
    } else if (value.isDevice() && !value.toDevice().is_cpu()) {
      value = c10::Device(at::kCPU);  // a factory's device
      continue;
    } else {
      continue;
    }
    value = c10::IValue();  // the caller's tensors are not kept
  }
}

torch::jit::Stack QueuedArgs::stack(Aliases& aliases) const {
  torch::jit::Stack values(values_.begin(), values_.end());
  for (const Slot& slot : slots_) {
    c10::IValue& value = values[slot.position];
    const TensorSnapshot* tensors = tensors_.data() + slot.first;
    switch (slot.kind) {
      case Kind::kTensor:
        value = aliases.of(tensors[0]);
        break;
      case Kind::kTensorList: {
        c10::List<at::Tensor> list;
        list.reserve(slot.count);
        for (uint32_t k = 0; k < slot.count; ++k) {
          list.push_back(aliases.of(tensors[k]));
        }
        value = std::move(list);
        break;
      }
      case Kind::kOptionalTensorList: {
        c10::List<std::optional<at::Tensor>> list;
        list.reserve(slot.count);
        for (uint32_t k = 0; k < slot.count; ++k) {
          list.push_back(tensors[k].none ? std::nullopt
                                         : std::optional<at::Tensor>(
                                               aliases.of(tensors[k])));
        }
        value = std::move(list);
        break;
      }
    }
  }
  return values;
}

c10::SmallVector<at::Tensor, 2> QueuedArgs::results(Aliases& aliases) const {
  c10::SmallVector<at::Tensor, 2> out;
  for (const TensorSnapshot& t : results_) {
    out.push_back(aliases.of(t));
  }
  return out;
}

}  // namespace torch_infini::runtime::host
