#include "common/strings.h"

namespace kgpu {

std::string trim(std::string_view s, std::string_view chars) {
  const auto b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(chars) - b + 1));
}

std::string escape(std::string_view s, std::initializer_list<std::pair<char, std::string_view>> table) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    bool replaced = false;
    for (const auto& [from, to] : table) {
      if (c == from) {
        out += to;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  return out;
}

}  // namespace kgpu
