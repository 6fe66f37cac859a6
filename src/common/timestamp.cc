#include "common/timestamp.h"

#include <fmt/format.h>

#include <cstdio>
#include <ctime>

namespace kgpu {

std::string format_rfc3339(std::chrono::system_clock::time_point t, int fraction_digits) {
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  const auto secs = static_cast<std::time_t>(us >= 0 ? us / 1'000'000 : (us - 999'999) / 1'000'000);
  const int64_t frac = us - static_cast<int64_t>(secs) * 1'000'000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  std::string out = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                                tm.tm_hour, tm.tm_min, tm.tm_sec);
  if (fraction_digits == 3) out += fmt::format(".{:03}", frac / 1000);
  if (fraction_digits == 6) out += fmt::format(".{:06}", frac);
  return out + "Z";
}

std::optional<std::chrono::system_clock::time_point> parse_rfc3339(std::string_view text) {
  const std::string s(text.substr(0, 64));
  if (s.size() != text.size()) return std::nullopt;
  std::tm tm{};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (rest == nullptr) return std::nullopt;
  if (*rest == '.') {
    ++rest;
    while (*rest >= '0' && *rest <= '9') ++rest;
  }
  long offset = 0;
  if (*rest == 'Z' || *rest == 'z') {
    ++rest;
  } else if (*rest == '+' || *rest == '-') {
    int hh = 0, mm = 0;
    if (std::sscanf(rest + 1, "%2d:%2d", &hh, &mm) != 2) return std::nullopt;
    offset = (*rest == '+' ? 1 : -1) * (hh * 3600L + mm * 60L);
    rest += 6;
  } else {
    return std::nullopt;
  }
  if (*rest != '\0') return std::nullopt;
  return std::chrono::system_clock::from_time_t(timegm(&tm) - offset);
}

}  // namespace kgpu
