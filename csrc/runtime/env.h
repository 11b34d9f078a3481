#pragma once

// Reading the TORCH_INFINI_* environment variables. A variable that is set
// but malformed is an error naming it, never a silent default.

#include <cstddef>
#include <cstdint>
#include <string>

namespace torch_infini::runtime {

// The variable's value, or `fallback` when it is unset or empty.
std::string env_string(const char* name, const std::string& fallback);

// An integer in [min_value, max_value].
int64_t env_int(const char* name, int64_t fallback, int64_t min_value,
                int64_t max_value);

// A byte count: digits with an optional K, M or G suffix (powers of 1024).
size_t env_bytes(const char* name, size_t fallback);

}  // namespace torch_infini::runtime
