// Small string helpers shared by the parsers and renderers.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include "common/error.h"

namespace kgpu {

// `s` without leading and trailing characters from `chars`.
std::string trim(std::string_view s, std::string_view chars = " \t\r");

// s with ASCII letters lowered (other bytes unchanged).
std::string ascii_lower(std::string_view s);

// `s` with each character that has an entry in `table` replaced by that entry's text.
std::string escape(std::string_view s, std::initializer_list<std::pair<char, std::string_view>> table);

// Splits a listen address "[host]:port" (host empty = all interfaces, "0.0.0.0"; "[::1]" loses
// its brackets). Errors (kInvalidArgument) name the bad address.
Result<std::pair<std::string, int>> parse_address(const std::string& address);

// 64-bit FNV-1a of `s` (offset basis 0xcbf29ce484222325, prime 0x100000001b3).
uint64_t fnv1a(std::string_view s);

// Appends code point `cp` (at most 0x10FFFF; the caller checks) to `out` as UTF-8.
void append_utf8(std::string& out, uint32_t cp);

}  // namespace kgpu
