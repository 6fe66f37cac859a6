#include "top/exposition.h"

#include <charconv>
#include <cmath>
#include <limits>

namespace kgpu::top {

const std::string* Sample::label(std::string_view key) const {
  for (const auto& [k, v] : labels) {
    if (k == key) return &v;
  }
  return nullptr;
}

namespace {

bool name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':'; }
bool name_char(char c) { return name_start(c) || (c >= '0' && c <= '9'); }

// Prometheus' float syntax: a decimal or hex float, or (any case) Inf, +Inf, -Inf, NaN.
bool parse_value(std::string_view s, double& out) {
  if (s.empty()) return false;
  std::string lower;
  if (s.size() <= 4) {
    for (char c : s) lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c);
    if (lower == "+inf" || lower == "inf") {
      out = std::numeric_limits<double>::infinity();
      return true;
    }
    if (lower == "-inf") {
      out = -std::numeric_limits<double>::infinity();
      return true;
    }
    if (lower == "nan") {
      out = std::numeric_limits<double>::quiet_NaN();
      return true;
    }
  }
  const char* begin = s.data();
  if (*begin == '+') ++begin;
  const auto [end, ec] = std::from_chars(begin, s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size();
}

struct LineParser {
  std::string_view line;
  size_t pos = 0;
  std::string error;

  void skip_blanks() {
    while (pos < line.size() && (line[pos] == ' ' || line[pos] == '\t')) ++pos;
  }
  std::string_view name(bool metric) {
    const size_t start = pos;
    if (pos >= line.size() || !(metric ? name_start(line[pos]) : name_start(line[pos]) && line[pos] != ':')) return {};
    ++pos;
    while (pos < line.size() && name_char(line[pos]) && (metric || line[pos] != ':')) ++pos;
    return line.substr(start, pos - start);
  }
  bool quoted(std::string& out) {
    if (pos >= line.size() || line[pos] != '"') {
      error = "a label value must be in double quotes";
      return false;
    }
    ++pos;
    while (pos < line.size()) {
      const char c = line[pos++];
      if (c == '"') return true;
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos >= line.size()) break;
      const char e = line[pos++];
      if (e == 'n') {
        out += '\n';
      } else if (e == '\\' || e == '"') {
        out += e;
      } else {
        error = std::string("unknown escape \\") + e + " in a label value";
        return false;
      }
    }
    error = "a label value is not closed";
    return false;
  }
};

}  // namespace

Result<std::vector<Sample>> parse_exposition(std::string_view text, std::string_view source, const ParseLimits& limits,
                                             const std::function<bool(std::string_view)>& keep) {
  if (text.size() > limits.max_bytes) {
    return fail(ErrorCode::kInvalidArgument, "{}: the page has {} bytes, more than the limit of {}", source,
                text.size(), limits.max_bytes);
  }
  std::vector<Sample> out;
  size_t samples = 0;
  size_t line_no = 0;
  size_t start = 0;
  while (start < text.size()) {
    ++line_no;
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    if (line.size() > limits.max_line) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: the line has {} bytes, more than the limit of {}", source,
                  line_no, line.size(), limits.max_line);
    }
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    LineParser p{line, 0, {}};
    p.skip_blanks();
    if (p.pos == line.size() || line[p.pos] == '#') continue;
    auto bad = [&](std::string_view what) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {}: {}", source, line_no, what,
                  line.substr(0, std::min<size_t>(line.size(), 120)));
    };
    const std::string_view metric = p.name(true);
    if (metric.empty()) return bad("expected a metric name");
    if (++samples > limits.max_samples) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: more than {} samples on the page", source, line_no,
                  limits.max_samples);
    }
    const bool wanted = !keep || keep(metric);
    Sample s;
    if (wanted) s.name = std::string(metric);
    const size_t after_name = p.pos;
    p.skip_blanks();
    const bool labelled = p.pos < line.size() && line[p.pos] == '{';
    if (!labelled) p.pos = after_name;
    if (labelled) {
      ++p.pos;
      size_t count = 0;
      while (true) {
        p.skip_blanks();
        if (p.pos < line.size() && line[p.pos] == '}') {
          ++p.pos;
          break;
        }
        const std::string_view label = p.name(false);
        if (label.empty()) return bad("expected a label name or '}'");
        if (++count > limits.max_labels) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: more than {} labels on one sample", source, line_no,
                      limits.max_labels);
        }
        p.skip_blanks();
        if (p.pos >= line.size() || line[p.pos] != '=') return bad("expected '=' after a label name");
        ++p.pos;
        p.skip_blanks();
        std::string value;
        if (!p.quoted(value)) return bad(p.error);
        if (wanted) {
          for (const auto& [k, v] : s.labels) {
            if (k == label) return bad("label " + std::string(label) + " given twice");
          }
          s.labels.emplace_back(std::string(label), std::move(value));
        }
        p.skip_blanks();
        if (p.pos < line.size() && line[p.pos] == ',') {
          ++p.pos;
        } else if (p.pos >= line.size() || line[p.pos] != '}') {
          return bad("expected ',' or '}' after a label value");
        }
      }
    }
    if (p.pos >= line.size() || (line[p.pos] != ' ' && line[p.pos] != '\t')) return bad("expected a value");
    p.skip_blanks();
    const size_t value_start = p.pos;
    while (p.pos < line.size() && line[p.pos] != ' ' && line[p.pos] != '\t') ++p.pos;
    if (!parse_value(line.substr(value_start, p.pos - value_start), s.value)) return bad("the value is not a number");
    p.skip_blanks();
    if (p.pos < line.size()) {
      // An optional timestamp: an integer (milliseconds).
      const std::string_view ts = line.substr(p.pos);
      int64_t t = 0;
      const char* b = ts.data() + (ts.starts_with('-') ? 1 : 0);
      const auto [e, ec] = std::from_chars(b, ts.data() + ts.size(), t);
      if (ec != std::errc() || e != ts.data() + ts.size()) return bad("unexpected text after the value");
    }
    if (wanted) out.push_back(std::move(s));
  }
  return out;
}

}  // namespace kgpu::top
