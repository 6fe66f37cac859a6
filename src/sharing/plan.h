// The sharing plan: which extended resources this node advertises to the kubelet and which
// kubelet device IDs each holds, from the GPU inventory and the config.
//
// make_plan() is a pure function (no I/O): the agent runs it at start and on every config or
// MIG layout change, and re-registers only the resources whose plan changed (`same_advertisement`).
// Rules (docs/device-plugin.md): MIG strategy none/single/mixed as NVIDIA's plugin; time-slicing
// and MPS replicate each selected device into `replicas` IDs `<id>::<n>`; with the kgpu `devices`
// extension, devices a rule does not select stay exclusive under the original name.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu/types.h"
#include "sharing/config.h"

namespace kgpu::sharing {

// One device as the kubelet sees it.
struct PlannedDevice {
  std::string id;           // kubelet device ID: a UUID, or "<uuid>::<n>" for a replica
  std::string uuid;         // the physical device: GPU-... or MIG-...
  std::string index;        // "3" for a GPU, "3:1" for MIG device slot 1 of GPU 3 (deviceIDStrategy index)
  unsigned gpu_index = 0;   // the physical GPU
  std::string gpu_uuid;     // the physical GPU's UUID (== uuid for whole GPUs)
  std::optional<unsigned> minor;  // /dev/nvidia<minor> of the physical GPU
  std::optional<unsigned> mig_gi, mig_ci;
  std::optional<int> numa_node;
  int replica = -1;  // 0..replicas-1 for replicas, -1 for a whole device
  int replicas = 1;  // replicas of the physical device
};

// MPS control-daemon limits for one GPU of an MPS-shared resource.
struct MpsLimit {
  unsigned gpu_index = 0;
  std::string uuid;
  uint64_t pinned_memory_mib = 0;  // total / replicas
  int active_thread_percentage = 100;  // 100 / replicas
};

struct PlannedResource {
  std::string name;         // nvidia.com/gpu, nvidia.com/gpu.shared, nvidia.com/mig-1g.10gb
  std::string socket_name;  // nvidia-gpu.sock: file name in the device-plugin directory
  SharingKind sharing = SharingKind::kNone;
  bool fail_requests_greater_than_one = false;
  bool mig = false;  // devices are MIG devices
  std::vector<PlannedDevice> devices;
  std::vector<MpsLimit> mps;  // set for MPS

  const PlannedDevice* find(const std::string& id) const;
};

struct Plan {
  std::vector<PlannedResource> resources;  // sorted by name
  std::vector<std::string> warnings;
  const PlannedResource* find(const std::string& name) const;
};

// Builds the plan. Fails (kInvalidArgument, naming the config source and the GPU) when the config
// cannot be applied to these GPUs: a `single` strategy on GPUs with different MIG layouts, a
// sharing rule for a resource that does not exist here, a device selected by two rules, a `devices`
// entry naming a GPU the node does not have...
// Lost GPUs stay in the plan (their devices are reported Unhealthy), so capacity does not change.
Result<Plan> make_plan(const gpu::Inventory& inventory, const Config& config);

// Why migStrategy single cannot be used on these GPUs (some in MIG mode, others not; several MIG
// profiles), or nullopt (usable, or another strategy). make_plan() fails with this reason; the
// agent then advertises nothing and labels <model>-MIG-INVALID, as GPU Feature Discovery does.
std::optional<std::string> single_layout_problem(const gpu::Inventory& inventory, const Config& config);

// Socket file name for a resource: "nvidia-" + the part after "nvidia.com/" + ".sock".
std::string socket_name_for(const std::string& resource);

// True when two plans of one resource advertise the same thing to the kubelet (same IDs and
// topology, same options); the agent keeps such a resource's server and registration.
bool same_advertisement(const PlannedResource& a, const PlannedResource& b);

// The physical-device ID of a kubelet ID: "<id>::<n>" -> "<id>".
std::string strip_replica(const std::string& id);

}  // namespace kgpu::sharing
