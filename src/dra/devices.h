// The DRA device model: the node's GPUs and MIG devices as NVIDIA's DRA driver (gpu.nvidia.com)
// publishes them in ResourceSlices, built from the NVML inventory (gpu::Inventory).
//
// Names (as NVIDIA's driver forms them): gpu/dra_names.h (`gpu-<minor>`, MIG devices
// `gpu-<parent minor>-mig-<profile>-<GI profile id>-<placement start>`).
//
// A GPU with MIG enabled publishes only its MIG devices (none when it has none); a lost GPU,
// or one without the facts a name needs (minor number; MIG profile id and placement), is left
// out and named in DeviceSet::problems.
//
// Attributes (bare names are the driver's domain): type ("gpu" | "mig"), uuid, productName,
// brand, architecture, cudaComputeCapability, driverVersion, cudaDriverVersion (versions),
// resource.kubernetes.io/pciBusID, resource.kubernetes.io/pcieRoot (when sysfs says), and for
// MIG parentUUID and profile. Capacities: memory (bytes, binary SI); MIG multiprocessors,
// copyEngines, decoders, encoders, jpegEngines, ofaEngines, memory (the profile's) and
// memorySlice<i> = 1 for each memory slice the device occupies.
//
// Dynamic MIG (BuildOptions::partitionable, docs/dra.md "Dynamic MIG"): a GPU in MIG mode given
// there publishes every profile at every allowed placement as a device that does not exist yet
// (`partition`), named as the MIG device it becomes, with the attributes and capacities of its
// profile (no uuid), consuming counters of the GPU's counter set `gpu-<minor>-counter-set`
// (KEP-4815 partitionable devices): memory-slice-<i> (1 per memory slice of the placement),
// compute-slices (the profile's compute slices of 7) and media-extensions (1, for +me profiles).
// So the scheduler allocates at most what one GPU can hold at once, at placements that do not
// overlap. The GPU's existing MIG instances are not published: they are the partitions of claims
// prepared on it.
//
// Thread safety: plain values; build_devices() is a pure function apart from reading sysfs.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cel/cel.h"
#include "common/error.h"
#include "gpu/dra_names.h"
#include "gpu/mig.h"
#include "gpu/types.h"
#include "k8s/quantity.h"

namespace kgpu::dra {

inline constexpr std::string_view kDefaultDriverName = "gpu.nvidia.com";
// The domain of the standard attributes Kubernetes defines (pciBusID, pcieRoot).
inline constexpr std::string_view kKubernetesDomain = "resource.kubernetes.io";
inline constexpr std::string_view kPciBusIdAttribute = "resource.kubernetes.io/pciBusID";
inline constexpr std::string_view kPcieRootAttribute = "resource.kubernetes.io/pcieRoot";

enum class DeviceType { kGpu, kMig };
const char* device_type_name(DeviceType t);  // "gpu" | "mig"

// One attribute value; the ResourceSlice field is {"int"|"bool"|"string"|"version": value}.
using AttributeValue = cel::Attribute;

struct Device {
  std::string name;  // "gpu-0", "gpu-1-mig-2g20gb-14-0"
  DeviceType type = DeviceType::kGpu;
  unsigned gpu_index = 0;   // NVML index of the GPU (the parent, for MIG)
  unsigned minor = 0;       // minor number of the GPU (the parent, for MIG): /dev/nvidia<minor>
  std::string uuid;         // "GPU-..." or "MIG-..."
  std::string parent_uuid;  // MIG: the GPU's UUID; empty for a GPU
  std::optional<unsigned> gpu_instance_id, compute_instance_id;  // MIG
  std::string profile;                                           // MIG: "1g.10gb", "1g.10gb+me"
  std::string pci_bus_id;  // the GPU's (the parent's, for MIG), as published: "0000:18:00.0"
  std::map<std::string, AttributeValue, std::less<>> attributes;
  std::map<std::string, k8s::Quantity, std::less<>> capacity;
  // Dynamic MIG: a partition NodePrepareResources creates (uuid, instance ids empty until then).
  bool partition = false;
  const gpu::mig::Shape* shape = nullptr;      // MIG: the GPU-instance shape, when known
  std::optional<unsigned> placement_start;     // MIG: first memory slice
  std::string counter_set;                     // partitionable: the counter set it consumes from
  std::map<std::string, int64_t> consumes;     // counter -> amount
};

// A KEP-4815 CounterSet (spec.sharedCounters[] of a ResourceSlice).
struct CounterSet {
  std::string name;
  std::map<std::string, int64_t> counters;
  bool operator==(const CounterSet&) const = default;
};
inline constexpr size_t kMaxCounterSetsPerSlice = 8;  // ResourceSliceMaxCounterSets

struct DeviceSet {
  std::vector<Device> devices;        // GPUs in index order, each followed by nothing or its MIG devices
  std::vector<CounterSet> counter_sets;  // one per partitionable GPU
  std::vector<std::string> problems;  // what was left out and why ("GPU 3: no minor number")
};

struct BuildOptions {
  // Root of sysfs for resource.kubernetes.io/pcieRoot (<root>/bus/pci/devices/<bus id> is a link
  // into <root>/devices/pci<domain>:<bus>/...). Empty: the attribute is not published.
  std::string sysfs_root;
  // GPUs (by index) published as partitionable, with the profiles they offer (dynamic MIG).
  std::map<unsigned, std::vector<gpu::mig::Offer>> partitionable;
};

// The counter set name of a partitionable GPU: "gpu-<minor>-counter-set".
std::string counter_set_name(unsigned minor);
// spec.sharedCounters[] entry: {"name", "counters": {c: {"value": "n"}}}.
nlohmann::json counter_set_json(const CounterSet& set);

DeviceSet build_devices(const gpu::Inventory& inventory, const BuildOptions& options = {});

using gpu::rfc1123_name;  // gpu/dra_names.h

// A driver, CUDA or compute-capability version as a semantic version, the way NVIDIA's driver
// reads it (Masterminds semver, loose): an optional 'v', one to three numeric parts, missing
// parts 0, leading zeros dropped, then optional -pre/+build. "535.104.05" -> 535.104.5,
// "12.4" -> 12.4.0. Errors (kInvalidArgument) quote the text.
Result<cel::Semver> loose_version(std::string_view text);

// NVML's "00000000:18:00.0" as Kubernetes' pciBusID attribute wants it: "0000:18:00.0".
std::string published_bus_id(std::string_view nvml_bus_id);

// "pci0000:00" for a device whose sysfs entry lives under /sys/devices/pci0000:00/...;
// nullopt when sysfs has no such link.
std::optional<std::string> pcie_root(const std::string& sysfs_root, std::string_view bus_id);

// The device as an entry of ResourceSlice (resource.k8s.io/v1) spec.devices[]:
// {"name", "attributes": {n: {"string"|"int"|"bool"|"version": v}}, "capacity": {n: {"value": q}}},
// and for a partition "consumesCounters": [{"counterSet", "counters": {c: {"value": "n"}}}].
nlohmann::json slice_device_json(const Device& device);

// The `device` variable a selector sees for this device under `driver`.
cel::DeviceInput cel_input(const Device& device, std::string_view driver = kDefaultDriverName);

// The device named `name`, or nullptr.
const Device* find_device(const std::vector<Device>& devices, std::string_view name);

}  // namespace kgpu::dra
