// What a container gets for the devices the kubelet allocated to it (the Allocate response), the
// CDI spec those responses refer to, and the device-set choice behind GetPreferredAllocation.
//
// Pure functions of the plan, the config and the node's facts (no gRPC, no NVML): the device
// plugin server converts ContainerEdits into protobuf.
#pragma once

#include <nlohmann/json.hpp>

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
  bool operator==(const DeviceNodeEdit&) const = default;
};

struct ContainerEdits {
  std::map<std::string, std::string> envs;
  std::vector<MountEdit> mounts;
  std::vector<DeviceNodeEdit> devices;
  std::map<std::string, std::string> annotations;
  std::vector<std::string> cdi_devices;  // fully qualified CDI names
};

// One entry of a directory under the driver root: its name and, for a symbolic link, the link's
// target as readlink() gives it ("" for anything else).
struct DirEntry {
  std::string name;
  std::string link;
  bool operator==(const DirEntry&) const = default;
};
// Lists a directory (host view): empty when it does not exist. A seam for tests.
using ListDir = std::function<std::vector<DirEntry>(const std::string& dir)>;

// The driver's user-space files a container needs, derived from the driver root by the rules of
// NVIDIA's container toolkit (docs/device-plugin.md, "The CDI spec"):
// - every file named `*.so.<driver version>` in the library directories and their `vdpau/`
//   subdirectory (CUDA, NVML, NVENC/NVDEC, OpenGL/EGL/GLES/Vulkan, VDPAU, OptiX, NGX...), plus
//   `libnvidia-nvvm70.so.*`, the EGL platform libraries (`libnvidia-egl-{gbm,wayland,wayland2,
//   xcb,xlib}.so.*.*`) and the X driver modules;
// - links: every symbolic link of the library's directory that leads to one of those files
//   (soname and `.so` links, chains of them) with its own target, plus the toolkit's fixed ones:
//   `libcuda.so` -> `libcuda.so.1`, `libGLX_indirect.so.0` -> `libGLX_nvidia.so.<v>`,
//   `libnvidia-opticalflow.so` -> `libnvidia-opticalflow.so.1`;
// - the tools (nvidia-smi, nvidia-debugdump, nvidia-persistenced, the MPS and IMEX tools), the
//   GSP firmware of the version, the persistenced/fabric-manager sockets and the MPS pipe
//   directory, and the EGL/GLVND/Vulkan ICD files.
struct DriverFiles {
  std::string version;              // the driver version the set was derived for ("" = none found)
  std::vector<MountEdit> mounts;    // read-only, at their host paths (relative to the driver root)
  // Links to create in the container: {target, link path}; the target as the link holds it.
  std::vector<std::pair<std::string, std::string>> links;
  // For links, the host's own symlinks at the same paths (mounted instead when no hook tool exists).
  std::vector<MountEdit> link_mounts;
  std::vector<std::string> library_dirs;  // container directories holding the libraries (ldcache)
  std::string libcuda_dir;                // where libcuda is ("" when not found)
  bool operator==(const DriverFiles&) const = default;
};

// `version` is the driver's version as NVML reports it; "" takes the version libcuda.so.1 points
// to (a driver root without NVML access, tests). Host paths are `driver_root` + path.
DriverFiles discover_driver_files(const std::string& driver_root, const std::string& version, const ListDir& list_dir);

// Device nodes of the optional device classes (NVIDIA's gds, mofed, gdrcopy) found under the dev
// root: /dev/nvidia-fs*, /dev/infiniband/uverbs* and rdma_cm, /dev/gdrdrv.
struct ExtraDevices {
  std::vector<DeviceNodeEdit> gds, mofed, gdrcopy;
  std::vector<MountEdit> gds_mounts;  // /run/udev and /etc/cufile.json, when nvidia-fs nodes exist
  // IMEX channels of the config that exist: {id, node}.
  std::vector<std::pair<int, DeviceNodeEdit>> imex_channels;
  std::vector<int> imex_missing;  // configured channel IDs whose node does not exist
  bool operator==(const ExtraDevices&) const = default;
};
ExtraDevices discover_extra_devices(const Config& config, const std::string& driver_root, const ListDir& list);

// A GPU's DRM device nodes (/dev/dri/card<N>, /dev/dri/renderD<N>), as the toolkit finds them:
// the entries of `<pci_devices_dir>/<bus id>/drm` that exist under the dev root's /dev/dri.
// `bus_id` is NVML's ("00000000:18:00.0"); empty when the GPU has no DRM device (no nvidia-drm).
std::vector<DeviceNodeEdit> discover_drm_nodes(const Config& config, const std::string& bus_id,
                                               const std::string& pci_devices_dir, const ListDir& list);

// The host's /dev/dri/by-path links of a GPU (`pci-<bus>-card`, `pci-<bus>-render`) that lead to one
// of `nodes`: {target as the link holds it, link path}, for the toolkit's create-symlinks hook.
std::vector<std::pair<std::string, std::string>> discover_drm_links(const Config& config, const std::string& bus_id,
                                                                    const std::vector<DeviceNodeEdit>& nodes,
                                                                    const ListDir& list);

// What allocate() needs to know about the host. `exists` answers whether a host path exists (a
// seam for tests); `mig_caps` maps "gpu<i>/gi<g>/access" and "gpu<i>/gi<g>/ci<c>/access" to the
// nvidia-caps minor numbers (read_mig_minors()).
struct HostFacts {
  std::function<bool(const std::string&)> exists;
  std::map<std::string, unsigned> mig_caps;
  // Driver libraries, tools and links every GPU container needs (discover_driver_files()).
  DriverFiles driver;
  // Host path of NVIDIA's hook tool, when installed: nvidia-cdi-hook (args `nvidia-cdi-hook
  // <hook> ...`) or nvidia-ctk (`nvidia-ctk hook <hook> ...`). The CDI spec then creates the links
  // and runs the CUDA-compat and ldcache hooks; without it the links are mounted instead.
  std::string hook_tool;
  ExtraDevices extra;
  // GPU index -> its DRM device nodes (discover_drm_nodes()), added to the GPU's CDI device.
  std::map<unsigned, std::vector<DeviceNodeEdit>> drm_nodes;
  // GPU index -> its /dev/dri/by-path links (discover_drm_links()), created by the hook tool.
  std::map<unsigned, std::vector<std::pair<std::string, std::string>>> drm_links;
  // The host's /etc/containerd/config.toml ("" when not readable), for cdi_runtime_warning().
  std::string containerd_config;
  bool operator==(const HostFacts& o) const {
    return mig_caps == o.mig_caps && driver == o.driver && hook_tool == o.hook_tool && extra == o.extra &&
           drm_nodes == o.drm_nodes && drm_links == o.drm_links;
  }
};

inline constexpr const char* kCdiVendor = "k8s.device-plugin.nvidia.com";
inline constexpr const char* kCdiClass = "gpu";
inline constexpr const char* kImexChannelClass = "imex-channel";
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

// One CDI spec file: its name under the CDI root and its JSON text.
struct CdiSpecFile {
  std::string name, text;
  bool operator==(const CdiSpecFile&) const = default;
};

// The CDI specs (JSON, cdiVersion 0.5.0): `<vendor>-gpu.json` with every physical device of the
// plan, named by UUID and by index as allocate() refers to them (device nodes, a whole GPU's DRM
// nodes, MIG capability nodes), and common edits (control nodes, driver files, hooks); `<vendor>-gds.json`,
// `-mofed.json`, `-gdrcopy.json` (one device, `all`) when enabled and their nodes exist; and
// `<vendor>-imex-channel.json` with the configured channels that exist.
// Error (kNotFound), nothing to write: a device without a device node (its node is
// missing under the dev root, or it has no minor number). CDI runtimes reject the whole file for
// one device with empty edits, so such a spec would fail every GPU container of the node.
Result<std::vector<CdiSpecFile>> cdi_specs(const Plan& plan, const Config& config, const HostFacts& host);

// Pieces of a CDI spec, shared with the DRA driver's claim specs (src/dra):
// - the containerEdits of one physical device (its device nodes, MIG capability nodes, a whole
//   GPU's DRM nodes and by-path links); kNotFound, naming the device, when it has no device node;
// - the edits every GPU container needs (control nodes, driver files, hooks, NVIDIA_VISIBLE_DEVICES=void);
// - a mount as CDI writes it; the spec text (cdiVersion 0.5.0) for `kind` ("vendor/class").
Result<nlohmann::json> cdi_device_edits(const PlannedDevice& device, const Config& config, const HostFacts& host);
nlohmann::json cdi_common_edits(const Config& config, const HostFacts& host);
nlohmann::json cdi_mount(const MountEdit& mount);
std::string cdi_spec_text(const std::string& kind, nlohmann::json devices, const nlohmann::json& edits);

// The CDI device names allocate() adds for the optional classes (gds, mofed, gdrcopy, IMEX
// channels) on this host, in that order.
std::vector<std::string> extra_cdi_devices(const Config& config, const HostFacts& host);

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
