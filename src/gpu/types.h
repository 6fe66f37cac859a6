// The node's GPUs as kgpu sees them: inventory, telemetry, processes, events.
//
// Plain values, independent of NVML. std::optional means "the GPU or driver does not provide
// this" (or the call failed; see the errors lists), which is never the same as zero.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kgpu::gpu {

// How two GPUs are connected, best first. Matches `nvidia-smi topo -m`'s vocabulary.
enum class Link {
  kSelf,        // the same GPU
  kNvLink,      // at least one active NVLink between them (directly or through NVSwitch)
  kPcieSwitch,  // PIX: one PCIe switch  (NVML SINGLE)
  kPcieMulti,   // PXB: several PCIe switches, no host bridge (NVML MULTIPLE)
  kHostBridge,  // PHB: the same PCIe host bridge
  kNumaNode,    // NODE: the same NUMA node, different host bridges
  kSystem,      // SYS: across the inter-socket link
  kUnknown,
};

// Short name as in `nvidia-smi topo -m`: X, NV, PIX, PXB, PHB, NODE, SYS, ?.
const char* link_short_name(Link l);
// Stable JSON name: self, nvlink, pcie-switch, pcie-multi-switch, host-bridge, numa-node, system, unknown.
const char* link_json_name(Link l);

struct PciInfo {
  std::string bus_id;  // "00000000:18:00.0"
  uint32_t domain = 0, bus = 0, device = 0;
  uint32_t device_id = 0;  // PCI device id, e.g. 0x2330 (upper 16 bits of NVML's pciDeviceId)
  uint32_t vendor_id = 0;  // 0x10DE
  uint32_t subsystem_id = 0;
};

struct MigDevice {
  unsigned index = 0;  // slot on the parent (nvmlDeviceGetMigDeviceHandleByIndex)
  std::string uuid;    // "MIG-..."
  unsigned gpu_instance_id = 0;
  unsigned compute_instance_id = 0;
  std::string profile;                 // "3g.40gb", "1g.10gb+me"
  std::optional<unsigned> profile_id;  // NVML GPU-instance profile id (19, 14, 9, ...)
  unsigned gpu_slices = 0;
  unsigned compute_slices = 0;
  uint64_t memory_mib = 0;
  unsigned sm_count = 0;
  std::optional<unsigned> placement_start, placement_size;  // memory slices
  // The GPU-instance profile's engines and memory (nvmlGpuInstanceProfileInfo_t), when read.
  struct Engines {
    unsigned copy = 0, decoders = 0, encoders = 0, jpeg = 0, ofa = 0;
    uint64_t profile_memory_mib = 0;  // memorySizeMB of the profile
  };
  std::optional<Engines> engines;
};

struct NvLinkInfo {
  unsigned link = 0;
  std::string remote_bus_id;           // the peer's PCI bus id (a GPU or an NVSwitch)
  std::optional<unsigned> remote_gpu;  // index of the peer when it is a GPU of this node
};

// A GPU's membership in an NVLink fabric (NVML GPU fabric info), when its registration completed.
struct GpuFabric {
  std::string cluster_uuid;  // "c8d4e9a2-...": the fabric (NVLink domain) the GPU belongs to
  unsigned clique_id = 0;    // the clique within it
  bool attached = false;     // registration completed successfully with a non-zero cluster UUID
};

struct GpuInfo {
  unsigned index = 0;
  std::string uuid;
  std::string name;
  // Why this GPU could not be read (e.g. "GPU_IS_LOST"); the other fields may be partial.
  std::optional<std::string> error;
  bool lost = false;

  std::optional<unsigned> minor_number;
  std::optional<std::string> serial;
  PciInfo pci;
  std::optional<uint64_t> memory_total_mib;
  std::optional<unsigned> architecture;  // NVML enum value
  std::string architecture_name;         // "Hopper"
  std::string family;                    // "hopper" (GPU Feature Discovery's gpu.family)
  std::optional<unsigned> brand;         // NVML brand enum (nvmlDeviceGetBrand)
  std::optional<int> cc_major, cc_minor;
  std::optional<unsigned> numa_node;
  std::optional<unsigned> sm_count;
  std::optional<unsigned> max_sm_clock_mhz, max_mem_clock_mhz;
  std::optional<unsigned> power_limit_mw;
  std::optional<int> compute_mode;
  std::optional<bool> persistence_mode;

  bool mig_capable = false;
  std::optional<bool> mig_enabled;          // current mode
  std::optional<bool> mig_pending_enabled;  // mode after the next reset
  std::vector<MigDevice> mig_devices;

  std::vector<NvLinkInfo> nvlinks;  // active links only
  bool gpm_supported = false;
  std::optional<GpuFabric> fabric;         // nullopt: no fabric (or not supported by the driver)
  std::optional<int> virtualization_mode;  // NVML: 0 none, 1 passthrough, 2 vGPU (guest), 3 host vGPU, 4 host vSGA
};

struct Inventory {
  std::string driver_version;
  std::string nvml_version;
  std::optional<int> cuda_driver_version;  // 12040 = 12.4
  std::vector<GpuInfo> gpus;
  // topology[i][j]: connection between gpus[i] and gpus[j].
  std::vector<std::vector<Link>> topology;
  // Problems that did not stop the inventory ("GPU 3: GPU_IS_LOST").
  std::vector<std::string> errors;
};

// NVML brand enum as go-nvlib names it ("Tesla", "Nvidia", "GeForceRTX", ...); "Unknown" otherwise.
const char* brand_name(unsigned brand);

// "12.4" from 12040.
std::string cuda_version_string(int v);

// A failed NVML call during sampling, for the agent's error counters.
struct CallError {
  std::string call;  // "nvmlDeviceGetPowerUsage"
  int code = 0;      // NVML return code
};

// One GPU's (or MIG device's) readings. Units in the names; nullopt = not provided.
struct Telemetry {
  unsigned gpu_index = 0;
  std::optional<unsigned> gpu_instance_id;  // set for a MIG device (one entry per GPU instance)
  std::string uuid;                         // GPU-... or MIG-... (of the first compute instance)
  bool lost = false;

  std::optional<unsigned> sm_clock_mhz, mem_clock_mhz;
  std::optional<unsigned> gpu_temp_c, memory_temp_c;
  std::optional<double> power_w;
  std::optional<unsigned> power_limit_mw;
  std::optional<uint64_t> energy_mj;
  std::optional<unsigned> pcie_replay;
  std::optional<unsigned> gpu_util_pct, mem_copy_util_pct, enc_util_pct, dec_util_pct;
  std::optional<uint64_t> fb_total_mib, fb_free_mib, fb_used_mib, fb_reserved_mib;
  std::optional<uint64_t> nvlink_tx_kib, nvlink_rx_kib;  // cumulative, all links
  std::optional<unsigned> remapped_rows_correctable, remapped_rows_uncorrectable;
  std::optional<bool> remap_pending, remap_failure;
  std::optional<uint64_t> ecc_sbe_volatile, ecc_dbe_volatile, ecc_sbe_aggregate, ecc_dbe_aggregate;
  std::optional<uint64_t> clock_event_reasons;  // throttling bitmask
  // GPM (Hopper and later), from two samples more than 100 ms apart.
  std::optional<double> gr_engine_active, tensor_active, dram_active;  // ratios 0..1
  std::optional<double> pcie_tx_bytes_per_s, pcie_rx_bytes_per_s;
  // Other profiling fields read through DCGM (src/gpu/dcgm), by DCGM field id (1002 SM_ACTIVE, ...).
  std::map<unsigned short, double> prof_fields;

  std::vector<CallError> errors;
};

struct ProcessInfo {
  unsigned pid = 0;
  std::optional<uint64_t> used_memory_bytes;
  std::optional<unsigned> gpu_instance_id, compute_instance_id;  // set on MIG
};

struct ProcessUtilization {
  unsigned pid = 0;
  uint64_t timestamp_us = 0;
  unsigned sm_util = 0, mem_util = 0, enc_util = 0, dec_util = 0;
};

enum class EventKind { kXid, kSingleBitEcc, kDoubleBitEcc, kGpuLost, kError };

struct Event {
  EventKind kind = EventKind::kXid;
  std::optional<unsigned> gpu_index;  // nullopt when NVML did not say which GPU
  std::string uuid;
  uint64_t xid = 0;  // the XID for kXid
  std::optional<unsigned> gpu_instance_id, compute_instance_id;
  std::string message;  // for kError / kGpuLost
};

const char* event_kind_name(EventKind k);

}  // namespace kgpu::gpu
