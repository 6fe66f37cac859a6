// Claim configuration shared by the DRA tests: NVIDIA's opaque GpuConfig as a claim's
// spec.devices.config[] carries it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace kgpu::testing {

// spec.devices.config[] giving request `request` MPS sharing with these defaults
// (resource.nvidia.com/v1beta1 GpuConfig, driver gpu.nvidia.com).
inline nlohmann::json mps_gpu_config(int active_thread_percentage, const std::string& pinned_memory_limit,
                                     const std::string& request = "gpu") {
  using nlohmann::json;
  const json mps{{"defaultActiveThreadPercentage", active_thread_percentage},
                 {"defaultPinnedDeviceMemoryLimit", pinned_memory_limit}};
  const json parameters{{"apiVersion", "resource.nvidia.com/v1beta1"},
                        {"kind", "GpuConfig"},
                        {"sharing", {{"strategy", "MPS"}, {"mpsConfig", mps}}}};
  return json::array(
      {{{"requests", json::array({request})}, {"opaque", {{"driver", "gpu.nvidia.com"}, {"parameters", parameters}}}}});
}

}  // namespace kgpu::testing
