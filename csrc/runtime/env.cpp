#include "runtime/env.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <cstdlib>

namespace torch_infini::runtime {

std::string env_string(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value == nullptr || *value == '\0' ? fallback : std::string(value);
}

int64_t env_int(const char* name, int64_t fallback, int64_t min_value,
                int64_t max_value) {
  const std::string text = env_string(name, "");
  if (text.empty()) {
    return fallback;
  }
  char* end = nullptr;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  TORCH_CHECK(end != nullptr && *end == '\0' && value >= min_value &&
                  value <= max_value,
              name, "='", text, "' is not an integer in [", min_value, ", ",
              max_value, "]");
  return value;
}

size_t env_bytes(const char* name, size_t fallback) {
  const std::string text = env_string(name, "");
  if (text.empty()) {
    return fallback;
  }
  char* end = nullptr;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  size_t scale = 1;
  if (end != nullptr && *end != '\0' && end[1] == '\0') {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K': scale = size_t{1} << 10; ++end; break;
      case 'M': scale = size_t{1} << 20; ++end; break;
      case 'G': scale = size_t{1} << 30; ++end; break;
      default: break;
    }
  }
  TORCH_CHECK(end != text.c_str() && end != nullptr && *end == '\0' &&
                  value > 0,
              name, "='", text,
              "' is not a positive byte count (digits with an optional K, M "
              "or G suffix)");
  return static_cast<size_t>(value) * scale;
}

}  // namespace torch_infini::runtime
