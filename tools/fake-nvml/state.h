// The simulated node behind the fake libnvidia-ml.so.1, and its YAML description
// (format: docs/fake-nvml.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu/mig.h"
#include "models.h"

namespace kgpu::fake {

// A reading that may change over time: constant, or a sine wave between min and max.
struct Wave {
  double min = 0, max = 0;
  double period_s = 0;  // 0: constant (min)
  double at(double t) const;
  double integral(double t) const;  // of at() from 0 to t
};

struct Telemetry {
  std::map<std::string, Wave> values;  // keys listed in docs/fake-nvml.md ("gpuUtil", "powerW", ...)
  double at(const std::string& k, double t, double fallback = 0) const {
    auto it = values.find(k);
    return it == values.end() ? fallback : it->second.at(t);
  }
  double integral(const std::string& k, double t, double fallback = 0) const {
    auto it = values.find(k);
    return it == values.end() ? fallback * t : it->second.integral(t);
  }
};

struct Process {
  unsigned pid = 0;
  uint64_t used_memory_mib = 0;
  std::optional<unsigned> gpu_instance_id;
  unsigned compute_instance_id = 0;
  Wave sm_util, mem_util, enc_util, dec_util;
};

struct MigInstance {
  const gpu::mig::Shape* shape = nullptr;
  const MigProfileSpec* profile = nullptr;
  unsigned start = 0;
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  std::string uuid;
  Telemetry telemetry;  // GPM readings of this instance (nvmlGpmMigSampleGet)
  // A compute instance spans the GPU instance (the MIG device exists). Instances from the node file
  // have one; one created through NVML gets one with nvmlGpuInstanceCreateComputeInstance.
  bool has_ci = true;
};

// The UUID of MIG instance `gpu_instance_id` of the GPU `gpu_uuid` (stable across runs).
std::string mig_uuid(const std::string& gpu_uuid, unsigned gpu_instance_id);

// NVML GPU fabric info of a GPU in a multi-node NVLink domain (docs/fake-nvml.md, `fabric`).
struct Fabric {
  unsigned char cluster_uuid[16] = {};
  unsigned clique_id = 0;
  unsigned char state = 3;  // NVML_GPU_FABRIC_STATE_COMPLETED
  int status = 0;           // NVML return code of the registration
};

struct Gpu {
  const ModelSpec* model = nullptr;
  std::string uuid;
  bool uuid_given = false;  // else derived from model, bus and index
  std::string serial;
  unsigned domain = 0, bus = 0;
  unsigned minor = 0;
  unsigned numa = 0;
  bool mig_enabled = false;
  bool mig_pending = false;
  std::vector<MigInstance> mig;
  std::vector<std::string> nvlink_remote;  // per link: remote bus id, "" = inactive
  Telemetry telemetry;
  std::vector<Process> processes;
  uint64_t base_used_mib = 0;
  std::optional<Fabric> fabric;  // nullopt: nvmlDeviceGetGpuFabricInfo answers NOT_SUPPORTED
  int virtualization_mode = 0;   // nvmlGpuVirtualizationMode_t
  bool persistence_mode = true;  // nvidia-persistenced running: an attachment that refuses a removal

  std::string bus_id() const;  // "00000000:18:00.0"
};

struct CallFault {
  std::string call;             // exported symbol name
  std::optional<unsigned> gpu;  // all GPUs when unset
  int error = 0;          // NVML_SUCCESS with only a delay
  unsigned delay_ms = 0;  // the call blocks this long first (a hung driver), holding the library's lock
  unsigned after = 0;     // the first `after` matching calls pass (a failure midway through a sequence)
  unsigned times = 0;     // then it fails this many times (0: every time)
};

struct XidInjection {
  unsigned gpu = 0;
  uint64_t xid = 0;
  unsigned long long type = 0;  // event type bit (XID by default)
};

struct Node {
  std::string driver_version = "580.105.08";
  std::string nvml_version = "13.580.105.08";
  int cuda_driver_version = 13000;
  std::vector<Gpu> gpus;
  std::vector<std::vector<unsigned>> pcie_switches, host_bridges;
  // Faults
  std::optional<int> init_error;
  std::vector<unsigned> lost;
  std::vector<CallFault> call_faults;
  std::vector<XidInjection> xids;  // append-only across reloads: new tail entries are delivered

  int topology_level(unsigned a, unsigned b) const;  // NVML topology level
};

// Node files larger than this are refused (no real node needs a tenth of it).
inline constexpr size_t kMaxNodeFileBytes = 4 << 20;

// Parses a node description. `source` names the text in errors ("node.yaml"); every error
// names source:line and the field path.
Result<Node> parse_node(const std::string& yaml_text, const std::string& source);

// The embedded default: preset hgx-h100-8 with light load.
Node default_node();

}  // namespace kgpu::fake
