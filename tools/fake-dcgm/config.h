// The fake DCGM's own settings (docs/fake-dcgm.md): faults and per-GPU field answers, from the
// YAML file named by $KGPU_FAKE_DCGM_CONFIG. The GPUs and their activity come from the fake
// NVML's node description ($KGPU_FAKE_NVML_CONFIG), so both libraries describe one node.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "common/error.h"
#include "gpu/dcgm/abi.h"

namespace kgpu::fake_dcgm {

// What DCGM answers for one field of one GPU or GPU instance instead of the node's reading.
struct Answer {
  enum Kind { kNumber, kBlank, kNotFound, kNotSupported, kNotPermissioned, kStatus } kind = kNumber;
  double number = 0;
  dcgm::Return status = dcgm::kOk;  // kStatus: the value's status
};

// What DCGM does for one entity: a GPU or a MIG GPU instance.
struct EntitySettings {
  bool profiling = true;               // false: watching a profiling field fails with PROFILING_NOT_SUPPORTED
  bool frozen = false;                 // true: the values' timestamps stop moving (DCGM stopped refreshing them)
  std::optional<dcgm::Return> status;  // every value of the entity has this status
  std::map<unsigned short, Answer> answers;
};

struct GpuSettings : EntitySettings {
  std::map<unsigned, EntitySettings> instances;  // MIG GPU instances, by NVML GPU-instance id
};

struct Settings {
  std::optional<dcgm::Return> init_error;       // dcgmInit
  std::optional<dcgm::Return> embedded_error;   // dcgmStartEmbedded
  std::optional<dcgm::Return> read_error;       // dcgmEntitiesGetLatestValues (the whole call)
  std::optional<dcgm::Return> hierarchy_error;  // dcgmGetGpuInstanceHierarchy
  std::map<unsigned, GpuSettings> gpus;         // by NVML index
};

inline constexpr size_t kMaxSettingsBytes = 1 << 20;

// Parses the settings; errors name `source:line: field: reason`.
Result<Settings> parse_settings(const std::string& text, const std::string& source);

}  // namespace kgpu::fake_dcgm
