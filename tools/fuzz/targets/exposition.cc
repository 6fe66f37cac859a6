// Fuzz target: top::parse_exposition (an agent's /metrics page, Prometheus text 0.0.4) and the
// node view built from it. Properties (src/top/exposition.h): it never crashes; an error names the
// source; a parsed page keeps the bounds (samples, labels per sample), every sample has a valid
// metric name and no label twice; node_metrics() over any parsed page keeps every allocation and
// share on a device key.
#include "top/exposition.h"

#include <string>

#include "fuzz.h"
#include "top/node_metrics.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using kgpu::fuzz::check;
  const std::string text = kgpu::fuzz::text(data, size);
  kgpu::top::ParseLimits limits;
  limits.max_bytes = 1 << 20;
  limits.max_line = 4096;
  limits.max_samples = 2000;
  limits.max_labels = 16;
  auto samples = kgpu::top::parse_exposition(text, "fuzz", limits);
  if (!samples) {
    check(samples.error().message.starts_with("fuzz"), "an error names the source");
    return 0;
  }
  check(samples->size() <= limits.max_samples, "at most max_samples samples");
  for (const auto& s : *samples) {
    check(!s.name.empty(), "a sample has a name");
    check(s.labels.size() <= limits.max_labels, "at most max_labels labels");
    for (size_t i = 0; i < s.labels.size(); ++i) {
      for (size_t j = i + 1; j < s.labels.size(); ++j) check(s.labels[i].first != s.labels[j].first, "no label twice");
    }
  }
  const auto view = kgpu::top::node_metrics(*samples);
  for (const auto& a : view.allocations) check(!a.device_key.empty(), "an allocation names its device");
  for (const auto& u : view.uses) check(!u.device_key.empty(), "a share names its device");
  for (const auto& [key, d] : view.devices) check(key == d.key && !key.empty(), "devices are keyed by their key");
  return 0;
}
