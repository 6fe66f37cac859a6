// The one logging facility of the node-side code (agent, device plugins, sampler, kubelet clients,
// fake NVML diagnostics). One line per event on stderr, with a level and key=value context:
//
//   text: ts=2026-12-01T18:01:31.123Z level=info msg="registered with the kubelet" resource=nvidia.com/gpu
//   json: {"ts":"2026-12-01T18:01:31.123Z","level":"info","msg":"registered with the kubelet","resource":"nvidia.com/gpu"}
//
// User-facing command output (tables, reports) is not logging: it goes to stdout, not through here.
//
// Thread safety: every function may be called from any thread; a line is written whole (one
// write under a lock). configure() and set_sink() are meant for start-up and tests.
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"

namespace kgpu::log {

enum class Level { kDebug, kInfo, kWarn, kError };
enum class Format { kText, kJson };

// "debug", "info", "warn" (or "warning"), "error"; kInvalidArgument names the bad value.
Result<Level> parse_level(std::string_view name);
// "text" or "json"; kInvalidArgument names the bad value.
Result<Format> parse_format(std::string_view name);
std::string_view level_name(Level level);

// Process-wide: the lowest level written (default info) and the line format (default text).
void configure(Level min_level, Format format);
// configure() from $KGPU_LOG_LEVEL and $KGPU_LOG_FORMAT where set and valid (others keep their
// value). For code that has no command line of its own (the fake NVML inside the agent's process).
void configure_from_environment();
bool enabled(Level level);

// Where finished lines go (without the trailing newline). The default writes to stderr.
class Sink {
 public:
  virtual ~Sink() = default;
  virtual void write(std::string_view line) = 0;
};
// Replaces the sink (null restores stderr); returns the previous one (null for stderr). Not owned.
Sink* set_sink(Sink* sink);

// One key=value pair of context. Values are formatted with fmt ("{}").
struct Field {
  std::string_view key;
  std::string value;
};
template <typename T>
Field kv(std::string_view key, const T& value) {
  return {key, fmt::format("{}", value)};
}

// Renders one line without writing it (the formats above; `ts` is UTC with milliseconds).
std::string render(Format format, double unix_seconds, Level level, std::string_view msg,
                   std::initializer_list<Field> fields);

// Writes one event when `level` is enabled.
void write(Level level, std::string_view msg, std::initializer_list<Field> fields = {});

inline void debug(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kDebug, msg, fields); }
inline void info(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kInfo, msg, fields); }
inline void warn(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kWarn, msg, fields); }
inline void error(std::string_view msg, std::initializer_list<Field> fields = {}) { write(Level::kError, msg, fields); }

}  // namespace kgpu::log
