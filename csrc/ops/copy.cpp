// Copies to, from and between infini devices. Contiguous copies of one dtype
// are runtime memcpys on the current stream; strided or converting copies
// run the provider's copy kernel on the device (or convert on the CPU side of
// a host<->device copy).
//
// Synchronization follows torch.cuda: copies that involve the host complete
// before returning (on the current stream, after its earlier work), except
// non_blocking copies whose host side is pinned memory of our allocator, on a
// provider with asynchronous copies: those are queued, and both storages are
// kept alive (events, record_stream) until the copy has run. Copies on the
// device are queued.

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include "core/InfiniAllocator.h"
#include "core/InfiniFunctions.h"
#include "core/InfiniHostAllocator.h"
#include "core/InfiniStream.h"
#include "ops/common.h"
#include "ops/sync_debug.h"

namespace torch_infini::ops {
namespace {

constexpr const char* kCopyOp = "aten::copy_";

bool plain_copy(const at::Tensor& src, const at::Tensor& dst) {
  return src.scalar_type() == dst.scalar_type() &&
      src.sizes() == dst.sizes() && src.is_contiguous() &&
      dst.is_contiguous();
}

void copy_on_device(const at::Tensor& src, const at::Tensor& dst);

// The stretch of device memory a strided tensor spans, as bytes from its
// first element.
size_t span_bytes(const at::Tensor& t) {
  int64_t last = 0;
  for (int64_t i = 0; i < t.dim(); ++i) {
    last += (t.size(i) - 1) * t.stride(i);
  }
  return static_cast<size_t>(last + 1) * t.element_size();
}

// A CPU tensor with `t`'s layout over a host copy of the memory it spans.
at::Tensor host_mirror(const at::Tensor& t, runtime::StreamHandle stream) {
  const size_t bytes = span_bytes(t);
  at::Tensor buffer = at::empty({static_cast<int64_t>(bytes)},
                                at::TensorOptions().dtype(at::kByte));
  auto& rt = runtime::provider();
  rt.memcpy_async(t.device().index(), buffer.mutable_data_ptr(),
                  t.const_data_ptr(), bytes, runtime::MemcpyKind::kDeviceToHost,
                  stream);
  rt.stream_synchronize(t.device().index(), stream);
  return buffer.view(t.scalar_type()).as_strided(t.sizes(), t.strides(), 0);
}

// For providers without a device copy kernel: exact data movement through
// the host (synchronous). The whole span of dst is read, updated and written
// back, so memory between its strided elements keeps its contents.
void copy_through_host(const at::Tensor& src, const at::Tensor& dst,
                       runtime::StreamHandle stream) {
  const at::Tensor host_src = host_mirror(src, stream);
  at::Tensor host_dst = host_mirror(dst, stream);
  host_dst.copy_(host_src);
  auto& rt = runtime::provider();
  rt.memcpy_async(dst.device().index(), dst.mutable_data_ptr(),
                  host_dst.const_data_ptr(), span_bytes(dst),
                  runtime::MemcpyKind::kHostToDevice, stream);
  rt.stream_synchronize(dst.device().index(), stream);
}

// dst = src on one device, queued on the current stream.
void copy_on_device(const at::Tensor& src, const at::Tensor& dst) {
  const c10::DeviceIndex device = dst.device().index();
  c10::DeviceGuard guard(dst.device());
  runtime::StreamHandle stream = current_native_stream(device);
  if (plain_copy(src, dst)) {
    if (src.const_data_ptr() != dst.const_data_ptr()) {
      runtime::provider().memcpy_async(
          device, dst.mutable_data_ptr(), src.const_data_ptr(), dst.nbytes(),
          runtime::MemcpyKind::kDeviceToDevice, stream);
    }
    return;
  }
  runtime::CopyArgs args{broadcast_arg(src, dst.sizes()), arg_of(dst)};
  auto& kernels = runtime::kernels();
  if (!kernels.copy_unsupported(args).empty()) {
    copy_through_host(src, dst, stream);
    return;
  }
  kernels.copy(device, stream, args);
}

// A contiguous device tensor with `src`'s values (src itself if it is one).
at::Tensor contiguous_on_device(const at::Tensor& src) {
  if (src.is_contiguous()) {
    return src;
  }
  at::Tensor tmp = at::empty(src.sizes(), src.options());
  copy_on_device(src, tmp);
  return tmp;
}

// Whether a host<->device copy may return before it has run.
bool can_copy_async(const at::Tensor& host, const at::Tensor& device_side,
                    bool non_blocking) {
  if (!non_blocking) {
    return false;
  }
  const auto& caps = runtime::provider().capabilities();
  return caps.async_copy && caps.pinned_memory && plain_copy(host, device_side) &&
      pinned::is_pinned(host.const_data_ptr());
}

// Queues a plain copy between pinned host memory and the device, keeping both
// storages alive until the copy has run on the current stream.
void copy_async(const at::Tensor& src, const at::Tensor& dst,
                const at::Tensor& host, const at::Tensor& device_side,
                runtime::MemcpyKind kind) {
  const c10::DeviceIndex device = device_side.device().index();
  c10::DeviceGuard guard(device_side.device());
  const c10::Stream stream = current_stream(device);
  runtime::provider().memcpy_async(device, dst.mutable_data_ptr(),
                                   src.const_data_ptr(), dst.nbytes(), kind,
                                   native_stream(stream));
  pinned::record_copy(host.storage().data_ptr(), stream);
  allocator::record_stream(device_side.storage().data_ptr(), stream);
}

void host_to_device(const at::Tensor& src, const at::Tensor& dst,
                    bool non_blocking = false) {
  if (can_copy_async(src, dst, non_blocking)) {
    copy_async(src, dst, src, dst, runtime::MemcpyKind::kHostToDevice);
    return;
  }
  check_sync("a copy from pageable host memory to infini");
  const c10::DeviceIndex device = dst.device().index();
  c10::DeviceGuard guard(dst.device());
  // Convert and lay out on the CPU side, where it is cheap and exact.
  const at::Tensor staged =
      src.to(dst.scalar_type()).expand(dst.sizes()).contiguous();
  const at::Tensor target = dst.is_contiguous()
      ? dst
      : at::empty(dst.sizes(), dst.options());
  runtime::StreamHandle stream = current_native_stream(device);
  auto& rt = runtime::provider();
  rt.memcpy_async(device, target.mutable_data_ptr(), staged.const_data_ptr(),
                  target.nbytes(), runtime::MemcpyKind::kHostToDevice, stream);
  // The staged host memory is pageable: the copy must finish before it can
  // be released or changed by the caller.
  rt.stream_synchronize(device, stream);
  if (!target.is_same(dst)) {
    copy_on_device(target, dst);
  }
}

void device_to_host(const at::Tensor& src, const at::Tensor& dst,
                    bool non_blocking = false) {
  if (can_copy_async(dst, src, non_blocking)) {
    copy_async(src, dst, dst, src, runtime::MemcpyKind::kDeviceToHost);
    return;
  }
  check_sync("a copy from infini to the host");
  const c10::DeviceIndex device = src.device().index();
  c10::DeviceGuard guard(src.device());
  const at::Tensor source = contiguous_on_device(src);
  const bool direct = dst.is_contiguous() &&
      dst.scalar_type() == src.scalar_type() && dst.sizes() == src.sizes();
  const at::Tensor target = direct
      ? dst
      : at::empty(source.sizes(),
                  source.options().device(at::kCPU).pinned_memory(false));
  runtime::StreamHandle stream = current_native_stream(device);
  auto& rt = runtime::provider();
  rt.memcpy_async(device, target.mutable_data_ptr(), source.const_data_ptr(),
                  source.nbytes(), runtime::MemcpyKind::kDeviceToHost, stream);
  rt.stream_synchronize(device, stream);
  if (!direct) {
    dst.copy_(target);
  }
}

// `t`'s memory as stored: an alias without conjugate and negative bits.
at::Tensor stored_values(const at::Tensor& t) {
  at::Tensor raw = t.alias();
  raw._set_conj(false);
  raw._set_neg(false);
  return raw;
}

at::Tensor _copy_from(const at::Tensor& self, const at::Tensor& dst,
                      bool non_blocking) {
  TORCH_CHECK(self.defined() && dst.defined(), kCopyOp,
              ": undefined tensor");
  if (dst.numel() == 0) {
    return dst;
  }
  if (self.is_conj() != dst.is_conj() || self.is_neg() != dst.is_neg()) {
    // Conjugate and negative views (complex tensors): copy the stored
    // values, then apply what the two views' bits disagree on.
    const at::Tensor raw_src = stored_values(self);
    at::Tensor raw_dst = stored_values(dst);
    _copy_from(raw_src, raw_dst, non_blocking);
    if (self.is_conj() != dst.is_conj() && dst.is_complex()) {
      raw_dst.conj_physical_();
    }
    if (self.is_neg() != dst.is_neg()) {
      raw_dst.neg_();
    }
    return dst;
  }
  const bool from_device = self.device().type() == kInfini;
  const bool to_device = dst.device().type() == kInfini;
  // Checked now, as on the CPU, not when the queued copy runs.
  at::assert_no_internal_overlap(dst);
  if (from_device && to_device) {
    at::assert_no_partial_overlap(dst, self);
  }
  TORCH_CHECK((from_device || self.device().is_cpu()) &&
                  (to_device || dst.device().is_cpu()),
              kCopyOp, ": infini copies only to and from the CPU, got ",
              self.device(), " -> ", dst.device());
  const at::Tensor src =
      self.sizes() == dst.sizes() ? self : self.expand(dst.sizes());
  if (from_device && to_device) {
    if (src.device() == dst.device()) {
      copy_on_device(src, dst);
    } else {
      // Across devices: through the host, each side ordered on its own
      // device's current stream.
      at::Tensor staging = at::empty(
          src.sizes(), src.options().device(at::kCPU).pinned_memory(false));
      device_to_host(src, staging);
      host_to_device(staging, dst);
    }
  } else if (to_device) {
    host_to_device(src, dst, non_blocking);
  } else {
    device_to_host(src, dst, non_blocking);
  }
  return dst;
}

// Tensor.item(), bool(t), int(t): one element to the host, after the current
// stream's earlier work.
at::Scalar local_scalar_dense(const at::Tensor& self) {
  TORCH_CHECK(self.numel() == 1, "a Tensor with ", self.numel(),
              " elements cannot be converted to Scalar");
  at::Tensor host = at::empty(
      self.sizes(), self.options().device(at::kCPU).pinned_memory(false));
  device_to_host(self, host);
  // Reading the host copy is not a second aten::item for the profiler.
  at::DisableRecordFunctionGuard not_recorded;
  return host.item();
}

at::Tensor _copy_from_and_resize(const at::Tensor& self,
                                 const at::Tensor& dst) {
  dst.resize_(self.sizes());
  return _copy_from(self, dst, false);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_copy_from", TORCH_FN(_copy_from));
  m.impl("_copy_from_and_resize", TORCH_FN(_copy_from_and_resize));
  m.impl("_local_scalar_dense", TORCH_FN(local_scalar_dense));
}

// _copy_from sees conjugate and negative views as they are and applies their
// bits itself: through the conjugate fallback it would clone its input, and
// a clone is a copy, which is a _copy_from again (endlessly).
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace torch_infini::ops
