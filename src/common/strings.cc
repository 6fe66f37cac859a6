#include "common/strings.h"

namespace kgpu {

std::string trim(std::string_view s, std::string_view chars) {
  const auto b = s.find_first_not_of(chars);
  if (b == std::string_view::npos) return "";
  return std::string(s.substr(b, s.find_last_not_of(chars) - b + 1));
}

std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
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

Result<std::pair<std::string, int>> parse_address(const std::string& address) {
  const auto colon = address.rfind(':');
  if (colon == std::string::npos) {
    return fail(ErrorCode::kInvalidArgument, "--address '{}': expected [host]:port, e.g. :9400", address);
  }
  std::string host = address.substr(0, colon);
  if (host.starts_with('[') && host.ends_with(']')) host = host.substr(1, host.size() - 2);
  const std::string port = address.substr(colon + 1);
  int p = -1;
  try {
    size_t used = 0;
    p = std::stoi(port, &used);
    if (used != port.size()) p = -1;
  } catch (const std::exception&) {
    p = -1;
  }
  if (p < 0 || p > 65535) return fail(ErrorCode::kInvalidArgument, "--address '{}': bad port '{}'", address, port);
  return std::pair{host.empty() ? std::string("0.0.0.0") : host, p};
}

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

}  // namespace kgpu
