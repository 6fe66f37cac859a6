// Small string helpers shared by the parsers and renderers.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace kgpu {

// `s` without leading and trailing characters from `chars`.
std::string trim(std::string_view s, std::string_view chars = " \t\r");

// `s` with each character that has an entry in `table` replaced by that entry's text.
std::string escape(std::string_view s, std::initializer_list<std::pair<char, std::string_view>> table);

}  // namespace kgpu
