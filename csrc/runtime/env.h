#pragma once

// Reading the TORCH_INFINI_* environment variables, all the same way: unset
// or empty means the default; a set value that does not parse is an error at
// first use naming the variable, the value and the accepted forms (never a
// silent default, never a warning). torch_infini/_env.py applies the same
// rules to the variables read from Python.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>

namespace torch_infini::runtime {

// The variable's value, or `fallback` when it is unset or empty.
std::string env_string(const char* name, const std::string& fallback);

// Raises "NAME='value' is invalid: expected <accepted>".
[[noreturn]] void env_invalid(const char* name, const std::string& value,
                              const std::string& accepted);

// An integer in [min_value, max_value].
int64_t env_int(const char* name, int64_t fallback, int64_t min_value,
                int64_t max_value);

// A byte count: digits with an optional K, M or G suffix (powers of 1024).
size_t env_bytes(const char* name, size_t fallback);

// A switch: exactly "1" (on) or "0" (off).
bool env_switch(const char* name, bool fallback);

// One of `choices`, spelled exactly.
std::string env_choice(const char* name, const std::string& fallback,
                       std::initializer_list<const char*> choices);

// Parses a switch value ("1" or "0") found inside another variable (for
// example TORCH_INFINI_ALLOC_CONF=caching:0); false when it is neither.
bool parse_switch(const std::string& text, bool* value);

}  // namespace torch_infini::runtime
