// Tensor creation and resizing on the infini device: empty, empty_strided,
// resize_, and the storage resize the hooks expose.

#include <ATen/Context.h>
#include <ATen/native/ResizeCommon.h>
#include <ATen/native/TensorFactories.h>
#include <ATen/EmptyTensor.h>
#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "core/InfiniAllocator.h"
#include "core/InfiniFunctions.h"
#include "core/InfiniHooks.h"
#include "core/InfiniStream.h"
#include "ops/common.h"

namespace torch_infini {

void resize_storage_bytes(const c10::Storage& storage, size_t new_bytes) {
  TORCH_CHECK(storage.resizable(),
              "Trying to resize storage that is not resizable");
  c10::DeviceGuard guard(storage.device());
  const c10::DeviceIndex device = storage.device().index();
  at::DataPtr fresh = storage.allocator()->allocate(new_bytes);
  const size_t keep = std::min(storage.nbytes(), new_bytes);
  if (keep > 0) {
    // Queue the copy on the current stream, and keep the old block from
    // being reused by its own stream before that copy has run.
    const c10::Stream stream = current_stream(device);
    allocator::record_stream(storage.data_ptr(), stream);
    runtime::provider().memcpy_async(device, fresh.get(), storage.data(),
                                     keep, runtime::MemcpyKind::kDeviceToDevice,
                                     native_stream(stream));
  }
  storage.set_data_ptr_noswap(std::move(fresh));
  storage.set_nbytes(new_bytes);
}

namespace ops {

at::Tensor empty_strided_on_current_device(at::IntArrayRef size,
                                           at::IntArrayRef stride,
                                           at::ScalarType dtype) {
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, allocator::get(), ks,
                                           dtype);
}

at::Tensor empty_on_current_device(at::IntArrayRef size, at::ScalarType dtype) {
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, allocator::get(), ks, dtype,
                                   std::nullopt);
}

namespace {

c10::DeviceIndex target_device(std::optional<at::Device> device) {
  const c10::DeviceIndex index =
      device.has_value() && device->has_index() ? device->index() : -1;
  return resolve_device(index);
}

void check_not_pinned(std::optional<bool> pin_memory) {
  TORCH_CHECK(!pin_memory.value_or(false),
              "Only dense CPU tensors can be pinned; an infini tensor is "
              "device memory already");
}

// CPU's rule for new memory under torch.use_deterministic_algorithms(True)
// with torch.utils.deterministic.fill_uninitialized_memory (the default):
// NaN for floating and complex dtypes, the largest value for the others.
bool fills_uninitialized_memory() {
  const auto& context = at::globalContext();
  return C10_UNLIKELY(context.deterministicAlgorithms() &&
                      context.deterministicFillUninitializedMemory());
}

at::Tensor filled_if_deterministic(at::Tensor t) {
  if (fills_uninitialized_memory() && t.numel() > 0) {
    at::native::fill_empty_deterministic_(t);
  }
  return t;
}

at::Tensor empty_memory_format(at::IntArrayRef size,
                               std::optional<at::ScalarType> dtype,
                               std::optional<at::Layout> layout,
                               std::optional<at::Device> device,
                               std::optional<bool> pin_memory,
                               std::optional<at::MemoryFormat> memory_format) {
  check_not_pinned(pin_memory);
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided,
              "infini supports only the strided layout, got ", *layout);
  c10::DeviceGuard guard(at::Device(kInfini, target_device(device)));
  constexpr c10::DispatchKeySet ks(c10::DispatchKey::PrivateUse1);
  return filled_if_deterministic(at::detail::empty_generic(
      size, allocator::get(), ks, c10::dtype_or_default(dtype),
      memory_format));
}

at::Tensor empty_strided(at::IntArrayRef size, at::IntArrayRef stride,
                         std::optional<at::ScalarType> dtype,
                         std::optional<at::Layout> layout,
                         std::optional<at::Device> device,
                         std::optional<bool> pin_memory) {
  check_not_pinned(pin_memory);
  TORCH_CHECK(!layout.has_value() || *layout == at::kStrided,
              "infini supports only the strided layout, got ", *layout);
  c10::DeviceGuard guard(at::Device(kInfini, target_device(device)));
  return filled_if_deterministic(empty_strided_on_current_device(
      size, stride, c10::dtype_or_default(dtype)));
}

const at::Tensor& resize_(const at::Tensor& self, at::IntArrayRef size,
                          std::optional<at::MemoryFormat> memory_format) {
  for (int64_t s : size) {
    TORCH_CHECK(s >= 0, "Trying to create tensor with negative dimension ", s,
                ": ", size);
  }
  auto* impl = self.unsafeGetTensorImpl();
  // As on the CPU: same sizes and no memory format keep the layout; new sizes
  // make the tensor contiguous; a memory format restrides.
  if (self.sizes() == size && !memory_format.has_value()) {
    return self;
  }
  if (self.sizes() != size) {
    impl->set_sizes_contiguous(size);
  }
  if (memory_format.has_value() &&
      *memory_format != at::MemoryFormat::Preserve) {
    impl->empty_tensor_restride(*memory_format);
  }
  const size_t needed =
      at::detail::computeStorageNbytes(self.sizes(), self.strides(),
                                       self.dtype().itemsize(),
                                       self.storage_offset());
  const size_t old_nbytes = self.storage().nbytes();
  if (self.numel() > 0 && needed > old_nbytes) {
    resize_storage_bytes(self.storage(), needed);
    if (fills_uninitialized_memory()) {
      at::native::fill_resize_deterministic_(self,
                                             static_cast<int64_t>(old_nbytes));
    }
  }
  return self;
}

at::Tensor& set_storage(at::Tensor& self, c10::Storage source,
                        int64_t storage_offset, at::IntArrayRef size,
                        at::IntArrayRef stride) {
  TORCH_CHECK(source.device().type() == kInfini,
              "set_: expected an infini storage, got one on ",
              source.device());
  TORCH_CHECK(storage_offset >= 0, "set_: storage offset must be >= 0, got ",
              storage_offset);
  TORCH_CHECK(stride.empty() || stride.size() == size.size(),
              "set_: size and stride must have the same length");
  auto* impl = self.unsafeGetTensorImpl();
  if (!self.storage().is_alias_of(source)) {
    impl->set_storage_keep_dtype(std::move(source));
  }
  impl->set_storage_offset(storage_offset);
  if (stride.empty()) {
    impl->set_sizes_contiguous(size);
  } else {
    impl->set_sizes_and_strides(size, stride);
  }
  const size_t needed = at::detail::computeStorageNbytes(
      self.sizes(), self.strides(), self.dtype().itemsize(), storage_offset);
  const size_t old_nbytes = self.storage().nbytes();
  if (self.numel() > 0 && needed > old_nbytes) {
    resize_storage_bytes(self.storage(), needed);
    if (fills_uninitialized_memory()) {
      at::native::fill_resize_deterministic_(self,
                                             static_cast<int64_t>(old_nbytes));
    }
  }
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage source) {
  const int64_t numel =
      static_cast<int64_t>(source.nbytes() / self.dtype().itemsize());
  return set_storage(self, std::move(source), 0, {numel}, {});
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage empty(c10::Storage::use_byte_size_t(), 0, allocator::get(),
                     /*resizable=*/true);
  return set_storage(self, std::move(empty), 0, {0}, {});
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("set_.source_Storage_storage_offset", TORCH_FN(set_storage));
  m.impl("set_.source_Storage", TORCH_FN(set_source_storage));
  m.impl("set_", TORCH_FN(set_empty));
  m.impl("empty.memory_format", TORCH_FN(empty_memory_format));
  m.impl("empty_strided", TORCH_FN(empty_strided));
  m.impl("resize_", TORCH_FN(resize_));
}

}  // namespace ops
}  // namespace torch_infini
