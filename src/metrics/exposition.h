// The Prometheus text exposition format (version 0.0.4), written by hand for speed: every page the
// agent serves (the GPU families of render() and the device plugins' own families) goes through
// these functions, so escaping is the same everywhere:
//
//   HELP text escapes backslash and newline; label values escape backslash, double quote and
//   newline; metric and label names are written as given (they are constants of ours).
//
// Every function appends to `out`; none allocates beyond the appended text and the escaped copy.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace kgpu::metrics::exposition {

std::string escape_help(std::string_view help);
std::string escape_label_value(std::string_view value);

// "# HELP <name> <help>\n# TYPE <name> <type>\n"; `type` is counter, gauge, histogram, summary or untyped.
void family(std::string& out, std::string_view name, std::string_view type, std::string_view help);

struct Label {
  std::string_view name, value;  // value unescaped
};
// `name="<escaped value>"`, preceded by ',' unless `out` ends with '{'.
void label(std::string& out, std::string_view name, std::string_view value);

// "<name>{<labels>} <value>\n" ("<name> <value>\n" without labels).
void sample(std::string& out, std::string_view name, std::initializer_list<Label> labels, uint64_t value);
void sample(std::string& out, std::string_view name, uint64_t value);

}  // namespace kgpu::metrics::exposition
