#include "common/log.h"

#include "common/timestamp.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <mutex>

#include "common/clock.h"

namespace kgpu::log {

namespace {

std::atomic<Level> g_min{Level::kInfo};
std::atomic<Format> g_format{Format::kText};
std::mutex g_mu;
Sink* g_sink = nullptr;  // guarded by g_mu; null = stderr

std::string timestamp(double unix_seconds) {
  return format_rfc3339(std::chrono::system_clock::time_point(std::chrono::duration_cast<std::chrono::microseconds>(
                            std::chrono::duration<double>(unix_seconds))),
                        3);
}

void append_json_string(std::string& out, std::string_view v) {
  out += '"';
  for (char c : v) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// logfmt: bare when the value has no space, quote, '=' or control character; else quoted with
// backslash, quote and newline escaped.
void append_text_value(std::string& out, std::string_view v) {
  bool bare = !v.empty();
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) bare = false;
  }
  if (bare) {
    out += v;
    return;
  }
  append_json_string(out, v);  // the same escapes as a JSON string
}

}  // namespace

Result<Level> parse_level(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn" || name == "warning") return Level::kWarn;
  if (name == "error") return Level::kError;
  return fail(ErrorCode::kInvalidArgument, "log level '{}': expected debug, info, warn or error", name);
}

Result<Format> parse_format(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return fail(ErrorCode::kInvalidArgument, "log format '{}': expected text or json", name);
}

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: return "error";
  }
  return "info";
}

void configure(Level min_level, Format format) {
  g_min = min_level;
  g_format = format;
}

void configure_from_environment() {
  if (const char* v = std::getenv("KGPU_LOG_LEVEL"); v != nullptr) {
    if (auto l = parse_level(v)) g_min = *l;
  }
  if (const char* v = std::getenv("KGPU_LOG_FORMAT"); v != nullptr) {
    if (auto f = parse_format(v)) g_format = *f;
  }
}

bool enabled(Level level) { return level >= g_min.load(std::memory_order_relaxed); }

Sink* set_sink(Sink* sink) {
  std::lock_guard lock(g_mu);
  Sink* old = g_sink;
  g_sink = sink;
  return old;
}

std::string render(Format format, double unix_seconds, Level level, std::string_view msg,
                   std::initializer_list<Field> fields) {
  std::string out;
  out.reserve(64 + msg.size());
  if (format == Format::kJson) {
    out += "{\"ts\":\"" + timestamp(unix_seconds) + "\",\"level\":\"";
    out += level_name(level);
    out += "\",\"msg\":";
    append_json_string(out, msg);
    for (const auto& f : fields) {
      out += ',';
      append_json_string(out, f.key);
      out += ':';
      append_json_string(out, f.value);
    }
    out += '}';
    return out;
  }
  out += "ts=" + timestamp(unix_seconds) + " level=";
  out += level_name(level);
  out += " msg=";
  // The message is always quoted, so that a reader can find it in a line by eye.
  std::string quoted;
  append_text_value(quoted, msg);
  if (quoted.empty() || quoted.front() != '"') quoted = "\"" + quoted + "\"";
  out += quoted;
  for (const auto& f : fields) {
    out += ' ';
    out += f.key;
    out += '=';
    append_text_value(out, f.value);
  }
  return out;
}

void write(Level level, std::string_view msg, std::initializer_list<Field> fields) {
  if (!enabled(level)) return;
  std::string line = render(g_format.load(std::memory_order_relaxed), Clock::real().unix_now(), level, msg, fields);
  std::lock_guard lock(g_mu);
  if (g_sink != nullptr) {
    g_sink->write(line);
    return;
  }
  line += '\n';
  // One write(2) per line: lines from several threads (or processes sharing the file) do not mix.
  const char* p = line.data();
  size_t left = line.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace kgpu::log
