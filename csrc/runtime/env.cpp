#include "runtime/env.h"

#include <c10/util/Exception.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>

namespace torch_infini::runtime {

std::string env_string(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value == nullptr || *value == '\0' ? fallback : std::string(value);
}

void env_invalid(const char* name, const std::string& value,
                 const std::string& accepted) {
  TORCH_CHECK(false, name, "='", value, "' is invalid: expected ", accepted);
}

int64_t env_int(const char* name, int64_t fallback, int64_t min_value,
                int64_t max_value) {
  const std::string text = env_string(name, "");
  if (text.empty()) {
    return fallback;
  }
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  // strtoll skips leading blanks and takes a sign: only plain digits count.
  const bool digits = std::isdigit(static_cast<unsigned char>(text[0])) != 0;
  if (!digits || errno != 0 || end == nullptr || *end != '\0' ||
      value < min_value || value > max_value) {
    env_invalid(name, text,
                "an integer from " + std::to_string(min_value) + " to " +
                    std::to_string(max_value));
  }
  return value;
}

size_t env_bytes(const char* name, size_t fallback) {
  const std::string text = env_string(name, "");
  if (text.empty()) {
    return fallback;
  }
  const char* accepted =
      "a positive byte count: digits with an optional K, M or G suffix "
      "(powers of 1024), for example 512M";
  if (!std::isdigit(static_cast<unsigned char>(text[0]))) {
    env_invalid(name, text, accepted);
  }
  char* end = nullptr;
  errno = 0;
  const unsigned long long value = std::strtoull(text.c_str(), &end, 10);
  unsigned shift = 0;
  if (end != nullptr && *end != '\0' && end[1] == '\0') {
    switch (std::toupper(static_cast<unsigned char>(*end))) {
      case 'K': shift = 10; ++end; break;
      case 'M': shift = 20; ++end; break;
      case 'G': shift = 30; ++end; break;
      default: break;
    }
  }
  if (errno != 0 || end == nullptr || *end != '\0' || value == 0 ||
      value > (~0ULL >> shift)) {
    env_invalid(name, text, accepted);
  }
  return static_cast<size_t>(value << shift);
}

bool parse_switch(const std::string& text, bool* value) {
  if (text == "1" || text == "0") {
    *value = text == "1";
    return true;
  }
  return false;
}

bool env_switch(const char* name, bool fallback) {
  const std::string text = env_string(name, "");
  if (text.empty()) {
    return fallback;
  }
  bool value = false;
  if (!parse_switch(text, &value)) {
    env_invalid(name, text, "1 (on) or 0 (off)");
  }
  return value;
}

std::string env_choice(const char* name, const std::string& fallback,
                       std::initializer_list<const char*> choices) {
  const std::string text = env_string(name, "");
  if (text.empty()) {
    return fallback;
  }
  std::string accepted;
  for (const char* choice : choices) {
    if (text == choice) {
      return text;
    }
    accepted += (accepted.empty() ? "one of: " : ", ") + std::string(choice);
  }
  env_invalid(name, text, accepted);
}

}  // namespace torch_infini::runtime
