// Fuzz target: the fake NVML's node description parser (fake::parse_node) over any bytes, then
// the derived values the fake library serves (bus ids, topology levels, waves). Contract
// (tools/fake-nvml/state.h): a description it cannot use is an error naming source:line.
#include "fuzz.h"
#include "state.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kgpu::fake;
  auto node = parse_node(kgpu::fuzz::text(data, size), "<fuzz>");
  if (!node) return 0;
  const unsigned n = static_cast<unsigned>(node->gpus.size());
  for (unsigned a = 0; a < n && a < 64; ++a) {
    (void)node->gpus[a].bus_id();
    for (const auto& [k, w] : node->gpus[a].telemetry.values) {
      (void)w.at(12.5);
      (void)w.integral(12.5);
    }
    for (unsigned b = 0; b < n && b < 64; ++b) (void)node->topology_level(a, b);
  }
  return 0;
}
