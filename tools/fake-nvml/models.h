// GPU models and node presets of the fake NVML, with facts as real drivers report them
// (product names, memory, PCI ids, SM counts, clocks, MIG profile tables). Sources and the
// few values chosen to fit kgpu's MIG naming rule are listed in docs/fake-nvml.md.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kgpu::fake {

struct MigProfileSpec {
  const char* shape;  // key of kgpu::gpu::mig::Shape ("1g", "1g+me", "1g.2x", "2g", "3g", "4g", "7g")
  unsigned memory_mib;
  unsigned sm_count;
  unsigned copy_engines, decoders, encoders, jpegs, ofas;
};

struct ModelSpec {
  const char* key;   // "H100-SXM-80GB"
  const char* name;  // as nvmlDeviceGetName reports it
  unsigned memory_mib;
  unsigned reserved_mib;
  unsigned pci_device_id;     // upper 16 bits of pciDeviceId
  unsigned pci_subsystem_id;  // full 32-bit value
  unsigned sm_count;
  int cc_major, cc_minor;
  unsigned architecture;  // NVML enum
  unsigned max_sm_clock_mhz, max_mem_clock_mhz;
  unsigned power_limit_w;
  unsigned idle_power_w;
  unsigned nvlinks;  // 0 on PCIe cards
  bool hbm;          // memory temperature sensor
  bool row_remapping;
  bool gpm;
  std::vector<MigProfileSpec> mig;  // empty: not MIG capable
};

const std::vector<ModelSpec>& models();
const ModelSpec* find_model(const std::string& key);

// A node preset: how many GPUs of which model and how they are wired.
struct NodePreset {
  const char* key;
  const char* description;
  const char* model;
  unsigned gpus;
  const char* nvlink;                                // "nvswitch" or "none"
  std::vector<unsigned> bus;                         // PCI bus number per GPU
  std::vector<unsigned> numa;                        // NUMA node per GPU
  std::vector<std::vector<unsigned>> pcie_switches;  // groups under one PCIe switch
  std::vector<std::vector<unsigned>> host_bridges;   // groups under one host bridge
};

const std::vector<NodePreset>& node_presets();
const NodePreset* find_node_preset(const std::string& key);

}  // namespace kgpu::fake
