// Opaque device configuration for this driver in a ResourceClaim: NVIDIA's
// `resource.nvidia.com/v1beta1` GpuConfig / MigDeviceConfig with a sharing strategy.
//
//   apiVersion: resource.nvidia.com/v1beta1
//   kind: GpuConfig                      # MigDeviceConfig for MIG devices
//   sharing:
//     strategy: TimeSlicing | MPS
//     timeSlicingConfig: {interval: Default | Short | Medium | Long}
//     mpsConfig: {defaultActiveThreadPercentage: 0..100, defaultPinnedDeviceMemoryLimit: <quantity>}
//
// Which entries apply to a device (allocation.devices.config[], or the claim's spec.devices.config[]
// when the allocation carries none): those whose opaque.driver is this driver and whose requests
// list is empty or names the device's request ("req" also matches "req/sub" of firstAvailable).
// A claim's entry wins over a class's, a request-specific one over a general one, a later one
// over an earlier one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "common/error.h"
#include "dra/devices.h"

namespace kgpu::dra {

inline constexpr std::string_view kConfigApiVersion = "resource.nvidia.com/v1beta1";

enum class SharingStrategy { kNone, kTimeSlicing, kMps };

struct SharingSettings {
  SharingStrategy strategy = SharingStrategy::kNone;
  std::string interval;                         // TimeSlicing: Default | Short | Medium | Long
  std::optional<int> active_thread_percentage;  // MPS
  std::optional<uint64_t> pinned_memory_bytes;  // MPS: per device
  bool operator==(const SharingSettings&) const = default;
};

// Validates one opaque.parameters object for a device of `type`. Errors (kInvalidArgument) name
// the field ("sharing.mpsConfig.defaultActiveThreadPercentage: must be 0..100, got 150").
Result<SharingSettings> parse_gpu_config(const nlohmann::json& parameters, DeviceType type);

// The settings for the device allocated for `request` in `claim` (a ResourceClaim object), from
// the entries for `driver` (see above). Errors name the config entry ("config[1]: ...").
Result<SharingSettings> settings_for(const nlohmann::json& claim, std::string_view driver, std::string_view request,
                                     DeviceType type);

}  // namespace kgpu::dra
