#include "ops/aten_layouts.h"

#include <string>
#include <unordered_map>

namespace torch_infini::ops {
namespace {

void bytes(std::string& key, const void* p, size_t n) {
  key.append(static_cast<const char*>(p), n);
}

template <typename T>
void scalar(std::string& key, char tag, T v) {
  key.push_back(tag);
  bytes(key, &v, sizeof(v));
}

// A tensor by device, dtype, sizes and strides (a CPU scalar by dtype and
// wrapped-number flag: its value is read where the kernel runs).
void append_tensor(std::string& key, const at::Tensor& t) {
  key.push_back(!t.defined() ? 'u' : t.device().is_cpu() ? 'c' : 't');
  if (!t.defined()) {
    return;
  }
  const auto dtype = t.scalar_type();
  bytes(key, &dtype, sizeof(dtype));
  if (t.device().is_cpu()) {
    key.push_back(t.unsafeGetTensorImpl()->is_wrapped_number() ? 'w' : 'n');
    return;
  }
  const int64_t dim = t.dim();
  bytes(key, &dim, sizeof(dim));
  bytes(key, t.sizes().data(), dim * sizeof(int64_t));
  bytes(key, t.strides().data(), dim * sizeof(int64_t));
  key.push_back(static_cast<char>(t.is_conj() | (t.is_neg() << 1)));
  const auto index = t.device().index();
  bytes(key, &index, sizeof(index));
}

// What the outputs' metadata depends on: every argument's metadata and
// value. False where an argument is of a kind not keyed (a Generator).
bool append_key(std::string& key, const c10::IValue& value) {
  if (value.isTensor()) {
    append_tensor(key, value.toTensor());
  } else if (value.isTensorList()) {
    key.push_back('L');
    for (const at::Tensor& t : value.toTensorList()) {
      append_tensor(key, t);
    }
    key.push_back(';');
  } else if (value.isNone()) {
    key.push_back('N');
  } else if (value.isInt()) {
    scalar(key, 'i', value.toInt());
  } else if (value.isDouble()) {
    scalar(key, 'd', value.toDouble());
  } else if (value.isComplexDouble()) {
    const c10::complex<double> v = value.toComplexDouble();
    scalar(key, 'z', v.real());
    scalar(key, 'z', v.imag());
  } else if (value.isBool()) {
    key.push_back(value.toBool() ? 'B' : 'b');
  } else if (value.isSymInt() || value.isSymFloat() || value.isSymBool()) {
    return false;
  } else if (value.isString()) {
    key.push_back('s');
    key += value.toStringRef();
    key.push_back(';');
  } else if (value.isDevice()) {
    const auto device = value.toDevice();
    scalar(key, 'D', static_cast<int>(device.type()));
    scalar(key, 'D', static_cast<int>(device.index()));
  } else if (value.isList()) {  // int[], float[], bool[], Tensor?[], ...
    key.push_back('[');
    for (const c10::IValue& element : value.toListRef()) {
      if (!append_key(key, element)) {
        return false;
      }
    }
    key.push_back(']');
  } else {
    return false;
  }
  return true;
}

constexpr size_t kMaxEntries = 4096;

using Cache =
    std::unordered_map<std::string, std::shared_ptr<const Layouts>>;

Cache& cache() {
  thread_local Cache entries;
  return entries;
}

// The key of a call in a per-thread buffer; false when it cannot be keyed.
bool key_of(const Plan& plan, c10::ArrayRef<c10::IValue> args,
            std::string& buffer) {
  buffer.clear();
  const Plan* address = &plan;
  bytes(buffer, &address, sizeof(address));
  for (const auto& value : args) {
    if (!append_key(buffer, value)) {
      return false;
    }
  }
  return true;
}

std::string& buffer() {
  thread_local std::string key;
  return key;
}

}  // namespace

std::shared_ptr<const Layouts> find_layouts(const Plan& plan,
                                            c10::ArrayRef<c10::IValue> args) {
  if (!key_of(plan, args, buffer())) {
    return nullptr;
  }
  const auto it = cache().find(buffer());
  return it == cache().end() ? nullptr : it->second;
}

void remember_layouts(const Plan& plan, c10::ArrayRef<c10::IValue> args,
                      std::shared_ptr<const Layouts> layouts) {
  std::string key;
  if (!key_of(plan, args, key)) {
    return;
  }
  if (cache().size() >= kMaxEntries) {
    cache().clear();  // entries are shared: callers holding one keep it
  }
  cache().insert_or_assign(std::move(key), std::move(layouts));
}

}  // namespace torch_infini::ops
