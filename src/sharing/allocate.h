// What a container gets for the devices the kubelet allocated to it (the Allocate response), the
// CDI spec those responses refer to, and the device-set choice behind GetPreferredAllocation.
//
// Pure functions of the plan, the config and the node's facts (no gRPC, no NVML): the device
// plugin server converts ContainerEdits into protobuf.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "gpu/types.h"
#include "sharing/config.h"
#include "sharing/plan.h"

namespace kgpu::sharing {

struct MountEdit {
  std::string container_path, host_path;
  bool read_only = false;
  bool operator==(const MountEdit&) const = default;
};

struct DeviceNodeEdit {
  std::string container_path, host_path;
  std::string permissions = "rw";
};

struct ContainerEdits {
  std::map<std::string, std::string> envs;
  std::vector<MountEdit> mounts;
  std::vector<DeviceNodeEdit> devices;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
};

// What allocate() needs to know about the host. `exists` answers whether a host path exists (a
// seam for tests); `mig_caps` maps "gpu<i>/gi<g>/access" and "gpu<i>/gi<g>/ci<c>/access" to the
// nvidia-caps minor numbers (read_mig_minors()).
struct HostFacts {
  std::function<bool(const std::string&)> exists;
  std::map<std::string, unsigned> mig_caps;
  // Driver libraries and tools every GPU container needs, as CDI mounts (discover_driver_files()).
  std::vector<MountEdit> driver_mounts;
  // Host path of nvidia-ctk, when installed: the CDI spec then runs its update-ldcache hook so
  // that the mounted libraries resolve on any image (e.g. an Ubuntu image on a RHEL host).
  std::string ldcache_hook;
  // The host's /etc/containerd/config.toml ("" when not readable), for cdi_runtime_warning().
  std::string containerd_config;
  bool operator==(const HostFacts& o) const {
    return mig_caps == o.mig_caps && driver_mounts == o.driver_mounts && ldcache_hook == o.ldcache_hook;
  }
};

// The driver's user-space files under `driver_root` (host view) that a container needs: the CUDA
// and NVML libraries (each versioned file and its soname links, mounted where they are on the
// host, so no ldconfig hook is needed) and nvidia-smi and the MPS tools. `list(dir)` returns
// the file names in a directory (empty when absent); host paths are `driver_root` + path.
std::vector<MountEdit> discover_driver_files(const std::string& driver_root,
                                             const std::function<std::vector<std::string>(const std::string&)>& list);

inline constexpr const char* kCdiVendor = "k8s.device-plugin.nvidia.com";
inline constexpr const char* kCdiClass = "gpu";
inline constexpr const char* kMaxSharedRequestError = "invalid request: maximum request size for shared resources is 1";

// Builds one ContainerEdits per container request. Replica IDs are stripped and de-duplicated.
// Errors (kInvalidArgument): an ID this resource does not advertise; more than one replica when
// failRequestsGreaterThanOne is set (NVIDIA's text: `invalid allocation request for "<resource>": `
// + kMaxSharedRequestError). The list strategies apply in a fixed order (envvar, volume-mounts,
// cdi-annotations, cdi-cri); with CDI strategies only, NVIDIA_VISIBLE_DEVICES=void switches off the
// runtime's legacy hook and no DeviceSpecs are added (the CDI spec carries the device nodes). `unique` seeds the
// cdi-annotations key so that two plugins' annotations on one container never collide.
// `assigned` (kgpu's scheduler chose one GPU for each request, so a request's replicas are all on
// it): the one-replica rule, which exists because replicas could otherwise land on several GPUs,
// does not apply.
Result<std::vector<ContainerEdits>> allocate(const PlannedResource& resource, const Config& config,
                                             const HostFacts& host,
                                             const std::vector<std::vector<std::string>>& requests,
                                             const std::string& unique, bool assigned = false);

// Why CDI allocations would give containers no GPU with this containerd config, or nullopt:
// `enable_cdi = false`, or a containerd 1.x config (`version = 2`) without `enable_cdi = true`
// (CDI is off by default before containerd 2.0). Other runtimes and unreadable configs: nullopt.
std::optional<std::string> cdi_runtime_warning(const std::string& containerd_config);

// The control device nodes (/dev/nvidiactl, -uvm, -uvm-tools, -modeset) that exist on the host.
std::vector<std::string> present_control_nodes(const Config& config, const HostFacts& host);

// The CDI spec (JSON, cdiVersion 0.5.0) for every physical device of the plan, named by UUID and
// by index, as allocate() refers to them: device nodes (and MIG capability nodes), plus the
// control nodes common to all devices. `dev_root` is where /dev is on the host.
std::string cdi_spec(const Plan& plan, const Config& config, const HostFacts& host);

// Parses /proc/driver/nvidia-caps/mig-minors ("gpu0/gi1/access 12" lines).
std::map<std::string, unsigned> parse_mig_minors(const std::string& text);

// GetPreferredAllocation for one container: `size` IDs from `available`, all of `must_include`
// first. Whole GPUs: the set with the best interconnect (NVLink, then PCIe switch, host bridge,
// NUMA node; `topology` is the inventory's matrix indexed by GPU index). Replicas: `distributed`
// spreads over the GPUs with the fewest replicas in use, `packed` fills the busiest first; never
// two replicas of one GPU while another GPU has a free one under `distributed`. IDs unknown to
// the resource are ignored; returns fewer than `size` only when `available` has fewer.
std::vector<std::string> preferred_allocation(const PlannedResource& resource,
                                              const std::vector<std::vector<gpu::Link>>& topology,
                                              SharedPolicy policy, const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include, int size);

// Link score used for whole-GPU sets (higher is better), exposed for tests and docs.
int link_score(gpu::Link l);

}  // namespace kgpu::sharing
