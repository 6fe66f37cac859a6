#include "metrics/exposition.h"

#include <fmt/format.h>

namespace kgpu::metrics::exposition {

namespace {

template <typename Escapes>
std::string escape_with(std::string_view s, Escapes escapes) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (const char* e = escapes(c)) {
      out += e;
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string escape_help(std::string_view help) {
  return escape_with(help, [](char c) -> const char* {
    switch (c) {
      case '\\': return "\\\\";
      case '\n': return "\\n";
      default: return nullptr;
    }
  });
}

std::string escape_label_value(std::string_view value) {
  return escape_with(value, [](char c) -> const char* {
    switch (c) {
      case '\\': return "\\\\";
      case '"': return "\\\"";
      case '\n': return "\\n";
      default: return nullptr;
    }
  });
}

void family(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out += "# HELP ";
  out += name;
  out += ' ';
  out += escape_help(help);
  out += "\n# TYPE ";
  out += name;
  out += ' ';
  out += type;
  out += '\n';
}

void label(std::string& out, std::string_view name, std::string_view value) {
  if (!out.empty() && out.back() != '{') out += ',';
  out += name;
  out += "=\"";
  out += escape_label_value(value);
  out += '"';
}

void sample(std::string& out, std::string_view name, std::initializer_list<Label> labels, uint64_t value) {
  out += name;
  if (labels.size() > 0) {
    out += '{';
    for (const auto& l : labels) label(out, l.name, l.value);
    out += '}';
  }
  out += ' ';
  fmt::format_to(std::back_inserter(out), "{}", value);
  out += '\n';
}

void sample(std::string& out, std::string_view name, uint64_t value) { sample(out, name, {}, value); }

}  // namespace kgpu::metrics::exposition
