// A bound on JSON nesting, checked before a recursive parser (nlohmann's) sees the text: hostile
// input nested a million levels deep would otherwise overflow the stack.
#pragma once

#include <string_view>

namespace kgpu {

// Whether no array or object in `text` is nested deeper than `max_depth` (strings are skipped;
// malformed text is left to the parser).
bool json_depth_within(std::string_view text, int max_depth);

}  // namespace kgpu
