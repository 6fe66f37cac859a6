// Fuzz target: metrics::parse_counters (dcgm-exporter's counters CSV) over any bytes. Contract
// (src/metrics/counters.h): malformed lines are errors naming source:line; every counter of a
// parsed set points at a known field, or is one of dcgm-exporter's DCGM_EXP_* fields.
#include "fuzz.h"
#include "metrics/counters.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kgpu::metrics;
  auto set = parse_counters(kgpu::fuzz::text(data, size), "<fuzz>");
  if (!set) return 0;
  for (const auto& c : set->counters) {
    if (c.exporter != ExporterField::kNone) {
      kgpu::fuzz::check(c.field == nullptr && c.name.starts_with("DCGM_EXP_"), "an exporter field has no DCGM field");
    } else {
      kgpu::fuzz::check(c.field != nullptr && find_field(c.field->name) == c.field, "a counter's field is in fields()");
    }
    kgpu::fuzz::check(!c.name.empty(), "a counter has a name");
    (void)metric_type_name(c.type);
  }
  return 0;
}
