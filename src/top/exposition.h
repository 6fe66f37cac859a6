// A reader of the Prometheus text exposition format (0.0.4): what `kgpu top` reads from the agents'
// /metrics pages. Bounded: the page's size, each line's length, the number of samples and the
// labels per sample; input past a bound, and any malformed line, is an error naming the source
// and the line ("<source>:<line>: <problem>"). HELP/TYPE lines and comments are skipped.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"

namespace kgpu::top {

struct ParseLimits {
  size_t max_bytes = 16 << 20;  // an 8-GPU page with 64 sharing pods is about 100 KiB
  size_t max_line = 64 << 10;
  size_t max_samples = 200'000;
  size_t max_labels = 64;
};

// One sample; label values unescaped.
struct Sample {
  std::string name;
  std::vector<std::pair<std::string, std::string>> labels;
  double value = 0;

  // The value of label `key`, or nullptr.
  const std::string* label(std::string_view key) const;
};

// Parses `text`. `keep` chooses by metric name the samples returned (all when empty); every line
// is checked either way. `source` names the page in errors (e.g. "node gpu-1 /metrics").
Result<std::vector<Sample>> parse_exposition(std::string_view text, std::string_view source,
                                             const ParseLimits& limits = {},
                                             const std::function<bool(std::string_view)>& keep = {});

}  // namespace kgpu::top
