#pragma once

// Writing a cache key: values appended as their bytes, so that two keys are
// equal exactly where the values are (a float by its bits, -0.0 apart from
// 0.0). Shared by the caches that key on a call's arguments.

#include <ATen/core/ivalue.h>

#include <string>

namespace torch_infini::runtime {

inline void append_bytes(std::string& key, const void* p, size_t n) {
  key.append(static_cast<const char*>(p), n);
}

// `v`'s bytes after a tag that says what kind of value follows.
template <typename T>
void append_tagged(std::string& key, char tag, T v) {
  key.push_back(tag);
  append_bytes(key, &v, sizeof(v));
}

// A value that is neither a tensor nor a list, exactly: None, an int, a
// float or complex by its bits, a bool, a string, a device. False for a
// kind not keyed (a generator, a symbolic size, an object).
inline bool append_plain_value(std::string& key, const c10::IValue& value) {
  if (value.isNone()) {
    key.push_back('N');
  } else if (value.isInt()) {
    append_tagged(key, 'i', value.toInt());
  } else if (value.isDouble()) {
    append_tagged(key, 'd', value.toDouble());
  } else if (value.isComplexDouble()) {
    const c10::complex<double> v = value.toComplexDouble();
    append_tagged(key, 'z', v.real());
    append_tagged(key, 'z', v.imag());
  } else if (value.isBool()) {
    key.push_back(value.toBool() ? 'B' : 'b');
  } else if (value.isString()) {
    // By its length first: a string holding the tag of what follows
    // cannot make two calls' keys meet.
    append_tagged(key, 's', value.toStringRef().size());
    key += value.toStringRef();
  } else if (value.isDevice()) {
    append_tagged(key, 'D', static_cast<int>(value.toDevice().type()));
    append_tagged(key, 'D', static_cast<int>(value.toDevice().index()));
  } else {
    return false;
  }
  return true;
}

}  // namespace torch_infini::runtime
