// Fuzz target: the fake DCGM's settings parser (fake_dcgm::parse_settings) and the -r address
// parser (dcgm::parse_endpoint) over any bytes. Contract: input they cannot use is an error naming
// source:line (settings) or the value (address); never a crash, never unbounded work.
#include "config.h"
#include "fuzz.h"
#include "gpu/dcgm/library.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text = kgpu::fuzz::text(data, size);
  auto settings = kgpu::fake_dcgm::parse_settings(text, "<fuzz>");
  if (settings) {
    for (const auto& [index, gpu] : settings->gpus) {
      for (const auto& [field, answer] : gpu.answers) (void)kgpu::dcgm::profiling_field_name(field);
      for (const auto& [gi, instance] : gpu.instances) {
        kgpu::fuzz::check(gi <= 14, "a GPU-instance id above 14 was accepted");
        for (const auto& [field, answer] : instance.answers) (void)kgpu::dcgm::profiling_field_name(field);
      }
    }
  }
  if (auto e = kgpu::dcgm::parse_endpoint(text.substr(0, 512)); e) (void)e->describe();
  return 0;
}
