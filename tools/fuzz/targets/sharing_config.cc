// Fuzz target: sharing::parse_config (the device plugin's `version: v1` config) over any bytes,
// then finalize() with no overrides (the cross-field rules). Contract (src/sharing/config.h): a
// document it cannot use is an error value, never a crash or an exception.
#include "fuzz.h"
#include "sharing/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kgpu::sharing;
  auto config = parse_config(kgpu::fuzz::text(data, size), "<fuzz>");
  if (!config) return 0;
  (void)finalize(*config, Overrides{});
  for (const auto& r : config->sharing.resources) (void)resource_name(r.name);
  return 0;
}
