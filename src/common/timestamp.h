// RFC 3339 timestamps as Kubernetes writes them: "2026-12-01T18:00:00Z" (Time) and
// "2026-12-01T18:00:00.123456Z" (MicroTime), always UTC.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace kgpu {

// `t` in UTC with `fraction_digits` (0, 3 or 6) digits of the second, truncated.
std::string format_rfc3339(std::chrono::system_clock::time_point t, int fraction_digits = 0);

// Parses "YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)"; the fraction is ignored. nullopt otherwise.
std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view s);

}  // namespace kgpu
