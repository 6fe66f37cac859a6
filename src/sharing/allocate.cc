#include "sharing/allocate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace kgpu::sharing {

namespace {

constexpr const char* kVolumeMountsRoot = "/var/run/nvidia-container-devices";
constexpr const char* kControlNodes[] = {"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                         "/dev/nvidia-modeset"};

std::string host_path(const std::string& root, const std::string& path) {
  if (root.empty() || root == "/") return path;
  return (root.ends_with('/') ? root.substr(0, root.size() - 1) : root) + path;
}

std::string device_name(const PlannedDevice& d, IdStrategy s) { return s == IdStrategy::kIndex ? d.index : d.uuid; }

std::string cdi_name(const std::string& device) { return fmt::format("{}/{}={}", kCdiVendor, kCdiClass, device); }

// The device nodes one physical device needs: /dev/nvidia<minor>, plus the MIG capability nodes.
std::vector<DeviceNodeEdit> device_nodes(const PlannedDevice& d, const Config& c, const HostFacts& host) {
  std::vector<DeviceNodeEdit> out;
  auto add = [&](const std::string& path) {
    const std::string hp = host_path(c.dev_root(), path);
    if (host.exists && !host.exists(hp)) return;
    out.push_back({path, hp, "rw"});
  };
  if (d.minor) add(fmt::format("/dev/nvidia{}", *d.minor));
  if (d.mig_gi) {
    for (const auto& key : {fmt::format("gpu{}/gi{}/access", d.gpu_index, *d.mig_gi),
                            fmt::format("gpu{}/gi{}/ci{}/access", d.gpu_index, *d.mig_gi, d.mig_ci.value_or(0))}) {
      if (auto it = host.mig_caps.find(key); it != host.mig_caps.end()) {
        add(fmt::format("/dev/nvidia-caps/nvidia-cap{}", it->second));
      }
    }
  }
  return out;
}

std::vector<DeviceNodeEdit> control_nodes(const Config& c, const HostFacts& host) {
  std::vector<DeviceNodeEdit> out;
  for (const char* path : kControlNodes) {
    const std::string hp = host_path(c.dev_root(), path);
    if (host.exists && !host.exists(hp)) continue;
    out.push_back({path, hp, "rw"});
  }
  return out;
}

}  // namespace

std::optional<std::string> cdi_runtime_warning(const std::string& toml) {
  if (toml.empty()) return std::nullopt;
  // `key = value` lines, comments and blanks ignored (enough for the two keys we look at).
  std::optional<std::string> enable_cdi, version;
  std::istringstream in(toml);
  std::string line;
  while (std::getline(in, line)) {
    const auto hash = line.find('#');
    if (hash != std::string::npos) line.resize(hash);
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    auto strip = [](std::string& x) {
      x.erase(0, x.find_first_not_of(" \t\"'"));
      x.erase(x.find_last_not_of(" \t\"'\r") + 1);
    };
    strip(key);
    strip(value);
    if (key == "enable_cdi") enable_cdi = value;
    if (key == "version" && !version) version = value;
  }
  if (enable_cdi == "false") {
    return "containerd has enable_cdi = false: with a CDI deviceListStrategy (the default, cdi-cri) containers get "
           "no GPU; set enable_cdi = true in /etc/containerd/config.toml and restart containerd, or use "
           "deviceListStrategy volume-mounts or envvar";
  }
  if (version == "2" && enable_cdi != "true") {
    return "containerd's config is version 2 (containerd 1.x) without enable_cdi = true, and CDI is off by default "
           "before containerd 2.0: with a CDI deviceListStrategy (the default, cdi-cri) containers get no GPU; set "
           "enable_cdi = true under [plugins.\"io.containerd.grpc.v1.cri\"] and restart containerd, or use "
           "deviceListStrategy volume-mounts or envvar";
  }
  return std::nullopt;
}

std::vector<std::string> present_control_nodes(const Config& config, const HostFacts& host) {
  std::vector<std::string> out;
  for (const auto& n : control_nodes(config, host)) out.push_back(n.container_path);
  return out;
}

Result<std::vector<ContainerEdits>> allocate(const PlannedResource& resource, const Config& config,
                                             const HostFacts& host,
                                             const std::vector<std::vector<std::string>>& requests,
                                             const std::string& unique, bool assigned) {
  std::vector<ContainerEdits> out;
  for (size_t ci = 0; ci < requests.size(); ++ci) {
    const auto& ids = requests[ci];
    std::vector<const PlannedDevice*> physical;
    std::set<std::string> seen;
    bool replicas = false;
    for (const auto& id : ids) {
      const PlannedDevice* d = resource.find(id);
      if (d == nullptr) {
        return fail(ErrorCode::kInvalidArgument, "container {}: unknown device ID '{}' for resource {}", ci, id,
                    resource.name);
      }
      replicas = replicas || d->replica >= 0;
      if (seen.insert(d->uuid).second) physical.push_back(d);
    }
    if (replicas && resource.fail_requests_greater_than_one && ids.size() > 1 && !assigned) {
      return fail(ErrorCode::kInvalidArgument, "invalid allocation request for \"{}\": {}", resource.name,
                  kMaxSharedRequestError);
    }
    ContainerEdits e;
    std::vector<std::string> names;
    for (const auto* d : physical) names.push_back(device_name(*d, config.id_strategy));
    // A fixed order, whatever the config's: volume-mounts' NVIDIA_VISIBLE_DEVICES wins over envvar's.
    const bool cdi_only =
        !config.has_list_strategy(ListStrategy::kEnvvar) && !config.has_list_strategy(ListStrategy::kVolumeMounts);
    if (config.has_list_strategy(ListStrategy::kEnvvar)) {
      e.envs["NVIDIA_VISIBLE_DEVICES"] = fmt::format("{}", fmt::join(names, ","));
    }
    if (config.has_list_strategy(ListStrategy::kVolumeMounts)) {
      e.envs["NVIDIA_VISIBLE_DEVICES"] = kVolumeMountsRoot;
      for (const auto& n : names) e.mounts.push_back({fmt::format("{}/{}", kVolumeMountsRoot, n), "/dev/null", false});
    }
    if (cdi_only) {
      // Switches off the legacy runtime hook for this container, whatever the image's ENV says
      // (CUDA images set NVIDIA_VISIBLE_DEVICES=all): only the CDI devices reach the container.
      e.envs["NVIDIA_VISIBLE_DEVICES"] = "void";
    }
    std::vector<std::string> cdi;
    for (const auto& n : names) cdi.push_back(cdi_name(n));
    for (auto& x : extra_cdi_devices(config, host)) cdi.push_back(std::move(x));
    if (config.has_list_strategy(ListStrategy::kCdiAnnotations)) {
      e.annotations[fmt::format("{}kgpu-device-plugin_{}-{}", config.cdi_annotation_prefix, unique, ci)] =
          fmt::format("{}", fmt::join(cdi, ","));
    }
    if (config.has_list_strategy(ListStrategy::kCdiCri)) e.cdi_devices = cdi;
    // NVIDIA's: these three whatever the strategy (the legacy runtime hook reads them).
    if (config.gds_enabled) e.envs["NVIDIA_GDS"] = "enabled";
    if (config.mofed_enabled) e.envs["NVIDIA_MOFED"] = "enabled";
    if (config.gdrcopy_enabled) e.envs["NVIDIA_GDRCOPY"] = "enabled";
    if (!cdi_only && !host.extra.imex_channels.empty()) {
      std::vector<std::string> channels;
      for (const auto& [id, node] : host.extra.imex_channels) channels.push_back(std::to_string(id));
      if (config.has_list_strategy(ListStrategy::kEnvvar)) {
        e.envs["NVIDIA_IMEX_CHANNELS"] = fmt::format("{}", fmt::join(channels, ","));
      }
      if (config.has_list_strategy(ListStrategy::kVolumeMounts)) {
        for (const auto& id : channels) e.mounts.push_back({fmt::format("{}/imex/{}", kVolumeMountsRoot, id), "/dev/null", false});
      }
    }
    if (config.pass_device_specs && !cdi_only) {
      for (const auto* d : physical) {
        for (auto& n : device_nodes(*d, config, host)) e.devices.push_back(std::move(n));
      }
      for (auto& n : control_nodes(config, host)) e.devices.push_back(std::move(n));
      for (const auto& [id, node] : host.extra.imex_channels) e.devices.push_back(node);
    }
    if (resource.sharing == SharingKind::kMps) {
      const std::string pipe = fmt::format("/mps/{}/pipe", resource.name);
      e.envs["CUDA_MPS_PIPE_DIRECTORY"] = pipe;
      e.mounts.push_back({pipe, host_path(config.mps_root, fmt::format("/{}/pipe", resource.name)), false});
      e.mounts.push_back({"/dev/shm", host_path(config.mps_root, "/shm"), false});
    }
    out.push_back(std::move(e));
  }
  return out;
}

std::map<std::string, unsigned> parse_mig_minors(const std::string& text) {
  std::map<std::string, unsigned> out;
  std::istringstream in(text);
  std::string key;
  unsigned minor = 0;
  while (in >> key >> minor) out[key] = minor;
  return out;
}

namespace {

using nlohmann::json;

json node_json(const DeviceNodeEdit& n) {
  return {{"path", n.container_path}, {"hostPath", n.host_path}, {"permissions", n.permissions}};
}

json mount_json(const MountEdit& m) {
  return {{"containerPath", m.container_path},
          {"hostPath", m.host_path},
          {"options", m.read_only ? json{"ro", "nosuid", "nodev", "bind"} : json{"nosuid", "nodev", "bind"}}};
}

// A createContainer hook running NVIDIA's hook tool: `nvidia-cdi-hook <name> ...` or
// `nvidia-ctk hook <name> ...`, as the installed tool expects.
json hook_json(const std::string& tool, const std::string& name, const std::vector<std::string>& args) {
  const std::string base = tool.substr(tool.rfind('/') + 1);
  json a = json::array({base});
  if (base == "nvidia-ctk") a.push_back("hook");
  a.push_back(name);
  for (const auto& x : args) a.push_back(x);
  return {{"hookName", "createContainer"}, {"path", tool}, {"args", a}};
}

std::string spec_text(const std::string& cls, json devices, const json& edits);

std::string spec_name(const std::string& cls) { return fmt::format("{}-{}.json", kCdiVendor, cls); }

}  // namespace

std::vector<std::string> extra_cdi_devices(const Config& config, const HostFacts& host) {
  std::vector<std::string> out;
  auto add = [&](bool enabled, const auto& nodes, const char* cls) {
    if (enabled && !nodes.empty()) out.push_back(fmt::format("{}/{}=all", kCdiVendor, cls));
  };
  add(config.gds_enabled, host.extra.gds, "gds");
  add(config.mofed_enabled, host.extra.mofed, "mofed");
  add(config.gdrcopy_enabled, host.extra.gdrcopy, "gdrcopy");
  for (const auto& [id, node] : host.extra.imex_channels) {
    out.push_back(fmt::format("{}/{}={}", kCdiVendor, kImexChannelClass, id));
  }
  return out;
}

Result<nlohmann::json> cdi_device_edits(const PlannedDevice& d, const Config& config, const HostFacts& host) {
  json nodes = json::array();
  for (const auto& n : device_nodes(d, config, host)) nodes.push_back(node_json(n));
  if (nodes.empty()) {
    const std::string node = d.minor ? host_path(config.dev_root(), fmt::format("/dev/nvidia{}", *d.minor))
                                     : std::string("(NVML reports no minor number)");
    return fail(ErrorCode::kNotFound, "device {} (index {}) has no device node ({})", d.uuid, d.index, node);
  }
  json device_edits = json::object();
  if (!d.mig_gi) {
    if (auto it = host.drm_nodes.find(d.gpu_index); it != host.drm_nodes.end()) {
      for (const auto& n : it->second) nodes.push_back(node_json(n));
    }
    if (auto it = host.drm_links.find(d.gpu_index); it != host.drm_links.end() && !host.hook_tool.empty()) {
      std::vector<std::string> args;
      for (const auto& [target, link] : it->second) {
        args.push_back("--link");
        args.push_back(target + "::" + link);
      }
      device_edits["hooks"] = json::array({hook_json(host.hook_tool, "create-symlinks", args)});
    }
  }
  device_edits["deviceNodes"] = nodes;
  return device_edits;
}

nlohmann::json cdi_common_edits(const Config& config, const HostFacts& host) {
  json common_nodes = json::array();
  for (const auto& n : control_nodes(config, host)) common_nodes.push_back(node_json(n));
  const DriverFiles& f = host.driver;
  json mounts = json::array();
  for (const auto& m : f.mounts) mounts.push_back(mount_json(m));
  json env = json::array({"NVIDIA_VISIBLE_DEVICES=void"});
  if (!f.libcuda_dir.empty()) env.push_back("NVIDIA_CTK_LIBCUDA_DIR=" + f.libcuda_dir);
  json hooks = json::array();
  if (!host.hook_tool.empty()) {
    // The toolkit's order: links, CUDA forward compatibility, then the ldcache over both.
    if (!f.links.empty()) {
      std::vector<std::string> args;
      for (const auto& [target, link] : f.links) {
        args.push_back("--link");
        args.push_back(target + "::" + link);
      }
      hooks.push_back(hook_json(host.hook_tool, "create-symlinks", args));
    }
    if (!f.version.empty()) {
      hooks.push_back(hook_json(host.hook_tool, "enable-cuda-compat", {"--host-driver-version=" + f.version}));
    }
    if (!f.library_dirs.empty()) {
      std::vector<std::string> args;
      for (const auto& d : f.library_dirs) {
        args.push_back("--folder");
        args.push_back(d);
      }
      hooks.push_back(hook_json(host.hook_tool, "update-ldcache", args));
    }
  } else {
    for (const auto& m : f.link_mounts) mounts.push_back(mount_json(m));
  }
  json edits = {{"env", env}, {"deviceNodes", common_nodes}};
  if (!mounts.empty()) edits["mounts"] = mounts;
  if (!hooks.empty()) edits["hooks"] = hooks;
  return edits;
}

nlohmann::json cdi_mount(const MountEdit& m) { return mount_json(m); }

namespace {
std::string spec_text(const std::string& cls, json devices, const json& edits) {
  return cdi_spec_text(fmt::format("{}/{}", kCdiVendor, cls), std::move(devices), edits);
}
}  // namespace

std::string cdi_spec_text(const std::string& kind, nlohmann::json devices, const nlohmann::json& edits) {
  json spec = {{"cdiVersion", "0.5.0"}, {"kind", kind}, {"devices", std::move(devices)}};
  if (!edits.empty()) spec["containerEdits"] = edits;
  return spec.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

Result<std::vector<CdiSpecFile>> cdi_specs(const Plan& plan, const Config& config, const HostFacts& host) {
  json devices = json::array();
  std::set<std::string> done;
  for (const auto& r : plan.resources) {
    for (const auto& d : r.devices) {
      if (!done.insert(d.uuid).second) continue;
      auto device_edits = cdi_device_edits(d, config, host);
      if (!device_edits) {
        return fail(ErrorCode::kNotFound,
                    "CDI spec not written: {}; CDI runtimes reject a spec with a device without edits, which would "
                    "fail every GPU container on this node",
                    device_edits.error().message);
      }
      for (const auto& name : {d.uuid, d.index}) devices.push_back({{"name", name}, {"containerEdits", *device_edits}});
    }
  }
  std::vector<CdiSpecFile> out;
  if (!devices.empty()) {
    out.push_back({spec_name(kCdiClass), spec_text(kCdiClass, std::move(devices), cdi_common_edits(config, host))});
  }
  auto extra = [&](bool enabled, const std::vector<DeviceNodeEdit>& nodes, const std::vector<MountEdit>& mounts,
                   const char* cls) {
    if (!enabled || nodes.empty()) return;
    json n = json::array(), m = json::array();
    for (const auto& x : nodes) n.push_back(node_json(x));
    for (const auto& x : mounts) m.push_back(mount_json(x));
    json edits = {{"deviceNodes", n}};
    if (!m.empty()) edits["mounts"] = m;
    out.push_back({spec_name(cls), spec_text(cls, json::array({{{"name", "all"}, {"containerEdits", edits}}}), json{})});
  };
  extra(config.gds_enabled, host.extra.gds, host.extra.gds_mounts, "gds");
  extra(config.mofed_enabled, host.extra.mofed, {}, "mofed");
  extra(config.gdrcopy_enabled, host.extra.gdrcopy, {}, "gdrcopy");
  if (!host.extra.imex_channels.empty()) {
    json d = json::array();
    for (const auto& [id, node] : host.extra.imex_channels) {
      d.push_back({{"name", std::to_string(id)}, {"containerEdits", {{"deviceNodes", json::array({node_json(node)})}}}});
    }
    out.push_back({spec_name(kImexChannelClass), spec_text(kImexChannelClass, std::move(d), json{})});
  }
  return out;
}

namespace {

// Where the toolkit finds driver libraries (its ldcache and default search paths), most specific first.
// Debian's packages keep the driver in nvidia/current/ (found through ld.so.conf.d).
constexpr const char* kLibDirs[] = {"/usr/lib/x86_64-linux-gnu",
                                    "/usr/lib/x86_64-linux-gnu/nvidia/current",
                                    "/usr/lib/aarch64-linux-gnu",
                                    "/usr/lib/aarch64-linux-gnu/nvidia/current",
                                    "/usr/lib64",
                                    "/lib/x86_64-linux-gnu",
                                    "/lib/aarch64-linux-gnu",
                                    "/lib64",
                                    "/usr/lib",
                                    "/lib"};
constexpr const char* kBinDirs[] = {"/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin", "/bin", "/sbin"};
constexpr const char* kBins[] = {"nvidia-smi",          "nvidia-debugdump",       "nvidia-persistenced",
                                 "nvidia-cuda-mps-control", "nvidia-cuda-mps-server", "nvidia-imex",
                                 "nvidia-imex-ctl"};
constexpr const char* kEglPlatformLibs[] = {"libnvidia-egl-gbm.so.", "libnvidia-egl-wayland.so.",
                                            "libnvidia-egl-wayland2.so.", "libnvidia-egl-xcb.so.",
                                            "libnvidia-egl-xlib.so."};
constexpr const char* kGraphicsConfigs[] = {
    "/usr/share/glvnd/egl_vendor.d/10_nvidia.json",
    "/usr/share/egl/egl_external_platform.d/15_nvidia_gbm.json",
    "/usr/share/egl/egl_external_platform.d/10_nvidia_wayland.json",
    "/usr/share/egl/egl_external_platform.d/09_nvidia_wayland2.json",
    "/usr/share/egl/egl_external_platform.d/20_nvidia_xcb.json",
    "/usr/share/egl/egl_external_platform.d/20_nvidia_xlib.json",
    "/etc/vulkan/icd.d/nvidia_icd.json",
    "/usr/share/vulkan/icd.d/nvidia_icd.json",
    "/etc/vulkan/icd.d/nvidia_layers.json",
    "/usr/share/vulkan/icd.d/nvidia_layers.json",
    "/etc/vulkan/implicit_layer.d/nvidia_layers.json",
    "/usr/share/vulkan/implicit_layer.d/nvidia_layers.json",
};
constexpr const char* kIpc[] = {"/run/nvidia-persistenced/socket", "/var/run/nvidia-persistenced/socket",
                                "/run/nvidia-fabricmanager/socket", "/var/run/nvidia-fabricmanager/socket",
                                "/tmp/nvidia-mps"};

bool is_version(std::string_view v) {
  if (v.empty() || v.front() == '.' || v.back() == '.' || v.find('.') == std::string_view::npos) return false;
  return std::all_of(v.begin(), v.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

}  // namespace

DriverFiles discover_driver_files(const std::string& driver_root, const std::string& version_in, const ListDir& list_dir) {
  DriverFiles out;
  // Each directory is read once per call (the tools' directories are looked at once per tool).
  std::map<std::string, std::vector<DirEntry>> cache;
  auto list = [&](const std::string& dir) -> const std::vector<DirEntry>& {
    auto it = cache.find(dir);
    if (it == cache.end()) it = cache.emplace(dir, list_dir(dir)).first;
    return it->second;
  };
  struct Dir {
    std::string path;  // container (= host, below the root) path
    std::vector<DirEntry> entries;
  };
  std::vector<Dir> dirs;
  for (const char* d : kLibDirs) {
    for (const std::string& path : {std::string(d), std::string(d) + "/vdpau"}) {
      const auto& e = list(host_path(driver_root, path));
      if (!e.empty()) dirs.push_back({path, e});
    }
  }
  std::string version = version_in;
  if (version.empty()) {
    for (const auto& d : dirs) {
      for (const auto& e : d.entries) {
        if (e.name == "libcuda.so.1" && e.link.starts_with("libcuda.so.") && is_version(e.link.substr(11))) {
          version = e.link.substr(11);
          break;
        }
      }
      if (!version.empty()) break;
    }
  }
  if (version.empty()) {
    for (const auto& d : dirs) {
      for (const auto& e : d.entries) {
        if (e.link.empty() && e.name.starts_with("libcuda.so.") && is_version(e.name.substr(11))) version = e.name.substr(11);
      }
      if (!version.empty()) break;
    }
  }
  out.version = version;
  // One file per name and subdirectory: /lib/x86_64-linux-gnu is /usr/lib/x86_64-linux-gnu on
  // merged-/usr hosts, and the more specific directory comes first.
  std::set<std::string> seen, seen_links;
  const std::string suffix = ".so." + version;
  for (const auto& d : dirs) {
    const bool vdpau = d.path.ends_with("/vdpau");
    std::map<std::string, std::string> links;  // name -> target, in this directory
    for (const auto& e : d.entries) {
      if (!e.link.empty()) links[e.name] = e.link;
    }
    bool any = false;
    for (const auto& e : d.entries) {
      if (!e.link.empty()) continue;
      const bool driver_lib = !version.empty() && e.name.ends_with(suffix);
      const bool nvvm70 = e.name.starts_with("libnvidia-nvvm70.so.");
      bool egl = false;
      for (const char* p : kEglPlatformLibs) {
        if (e.name.starts_with(p)) egl = std::count(e.name.begin() + static_cast<long>(std::string(p).size()), e.name.end(), '.') >= 1;
      }
      if (!driver_lib && !nvvm70 && !egl) continue;
      if (!seen.insert((vdpau ? "vdpau/" : "") + e.name).second) continue;
      const std::string path = d.path + "/" + e.name;
      out.mounts.push_back({path, host_path(driver_root, path), true});
      any = true;
      if (e.name.starts_with("libcuda.so.") && out.libcuda_dir.empty()) out.libcuda_dir = d.path;
      // The host's links that lead to this file (soname, `.so`, chains of them), each with its
      // own target so chains resolve in the container too; then the toolkit's fixed ones.
      std::vector<std::pair<std::string, std::string>> file_links;  // target, link name
      std::set<std::string> host_links;  // of file_links, those the host has leading here
      for (const auto& [name, target] : links) {
        std::string at = target;
        for (int hop = 0; hop < 8 && links.contains(at); ++hop) at = links.at(at);
        if (at != e.name) continue;
        file_links.push_back({target, name});
        host_links.insert(name);
      }
      if (driver_lib && e.name.starts_with("libcuda.so.")) file_links.push_back({"libcuda.so.1", "libcuda.so"});
      if (driver_lib && e.name.starts_with("libGLX_nvidia.so.")) file_links.push_back({e.name, "libGLX_indirect.so.0"});
      if (driver_lib && e.name.starts_with("libnvidia-opticalflow.so.")) {
        file_links.push_back({"libnvidia-opticalflow.so.1", "libnvidia-opticalflow.so"});
      }
      for (const auto& [target, name] : file_links) {
        const std::string link = d.path + "/" + name;
        if (!seen_links.insert(link).second) continue;
        out.links.push_back({target, link});
        // Without a hook tool the host's own link is mounted (the runtime follows it), when it
        // leads here: a host libGLX_indirect.so.0 that points to Mesa must not be mounted.
        if (host_links.contains(name)) out.link_mounts.push_back({link, host_path(driver_root, link), true});
      }
    }
    if (any) out.library_dirs.push_back(d.path);
  }
  // The X driver modules of this version.
  for (const char* d : {"/usr/lib/xorg/modules/drivers", "/usr/lib/xorg/modules/extensions",
                              "/usr/lib/xorg/modules/nvidia/extensions", "/usr/lib64/xorg/modules/drivers",
                              "/usr/lib64/xorg/modules/extensions"}) {
    for (const auto& e : list(host_path(driver_root, d))) {
      if (!e.link.empty()) continue;
      if (e.name == "nvidia_drv.so" || (!version.empty() && e.name == "libglxserver_nvidia.so." + version)) {
        const std::string path = fmt::format("{}/{}", d, e.name);
        out.mounts.push_back({path, host_path(driver_root, path), true});
      }
    }
  }
  for (const char* bin : kBins) {
    for (const char* d : kBinDirs) {
      bool found = false;
      for (const auto& e : list(host_path(driver_root, d))) {
        if (e.name == bin) {
          const std::string path = fmt::format("{}/{}", d, bin);
          out.mounts.push_back({path, host_path(driver_root, path), true});
          found = true;
          break;
        }
      }
      if (found) break;
    }
  }
  if (!version.empty()) {
    for (const std::string& d : {"/lib/firmware/nvidia/" + version, "/usr/lib/firmware/nvidia/" + version}) {
      bool found = false;
      for (const auto& e : list(host_path(driver_root, d))) {
        if (e.name.starts_with("gsp") && e.name.ends_with(".bin")) {
          out.mounts.push_back({d + "/" + e.name, host_path(driver_root, d + "/" + e.name), true});
          found = true;
        }
      }
      if (found) break;
    }
  }
  auto present = [&](const std::string& path) {
    const auto slash = path.rfind('/');
    const std::string dir = path.substr(0, slash), name = path.substr(slash + 1);
    for (const auto& e : list(host_path(driver_root, dir))) {
      if (e.name == name) return true;
    }
    return false;
  };
  for (const char* f : kGraphicsConfigs) {
    if (present(f)) out.mounts.push_back({f, host_path(driver_root, f), true});
  }
  std::set<std::string> ipc_seen;
  for (const char* f : kIpc) {
    const std::string path = f;
    const std::string key = path.starts_with("/var/run/") ? path.substr(4) : path;
    if (ipc_seen.contains(key) || !present(path)) continue;
    ipc_seen.insert(key);
    // The sockets are mounted writable (clients connect); the MPS directory too.
    out.mounts.push_back({path, host_path(driver_root, path), false});
  }
  return out;
}

std::vector<DeviceNodeEdit> discover_drm_nodes(const Config& config, const std::string& bus_id,
                                               const std::string& pci_devices_dir, const ListDir& list) {
  std::vector<DeviceNodeEdit> out;
  // NVML's 8-digit domain -> sysfs's 4 ("00000000:18:00.0" -> "0000:18:00.0"), lower case.
  const auto colon = bus_id.find(':');
  if (colon == std::string::npos || colon < 4 || bus_id.find('/') != std::string::npos) return out;
  std::string sysfs = bus_id.substr(colon - 4);
  std::transform(sysfs.begin(), sysfs.end(), sysfs.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto& dri = list(host_path(config.dev_root(), "/dev/dri"));
  for (const auto& e : list(fmt::format("{}/{}/drm", pci_devices_dir, sysfs))) {
    if (!e.name.starts_with("card") && !e.name.starts_with("renderD")) continue;
    if (std::none_of(dri.begin(), dri.end(), [&](const DirEntry& x) { return x.name == e.name; })) continue;
    const std::string path = "/dev/dri/" + e.name;
    out.push_back({path, host_path(config.dev_root(), path), "rw"});
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> discover_drm_links(const Config& config, const std::string& bus_id,
                                                                    const std::vector<DeviceNodeEdit>& nodes,
                                                                    const ListDir& list) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto colon = bus_id.find(':');
  if (nodes.empty() || colon == std::string::npos || colon < 4) return out;
  std::string pci = bus_id.substr(colon - 4);
  std::transform(pci.begin(), pci.end(), pci.begin(), [](unsigned char c) { return std::tolower(c); });
  const auto& entries = list(host_path(config.dev_root(), "/dev/dri/by-path"));
  for (const char* kind : {"card", "render"}) {
    const std::string name = fmt::format("pci-{}-{}", pci, kind);
    for (const auto& e : entries) {
      if (e.name != name || e.link.empty()) continue;
      // "../card1" or "/dev/dri/card1": the node it names must be one the device gets.
      const std::string node = "/dev/dri/" + e.link.substr(e.link.rfind('/') + 1);
      if (std::any_of(nodes.begin(), nodes.end(), [&](const DeviceNodeEdit& n) { return n.container_path == node; })) {
        out.push_back({e.link, "/dev/dri/by-path/" + name});
      }
    }
  }
  return out;
}

ExtraDevices discover_extra_devices(const Config& config, const std::string& /*driver_root*/, const ListDir& list) {
  ExtraDevices out;
  const std::string dev = config.dev_root();
  auto nodes = [&](const std::string& dir, auto match) {
    std::vector<DeviceNodeEdit> n;
    for (const auto& e : list(host_path(dev, dir))) {
      if (match(e.name)) n.push_back({dir + "/" + e.name, host_path(dev, dir + "/" + e.name), "rw"});
    }
    return n;
  };
  if (config.gds_enabled) {
    out.gds = nodes("/dev", [](const std::string& n) { return n.starts_with("nvidia-fs"); });
    if (!out.gds.empty()) {
      const std::string root = config.nvidia_driver_root;
      for (const char* f : {"/run/udev", "/etc/cufile.json"}) {
        const std::string p = f;
        const auto slash = p.rfind('/');
        for (const auto& e : list(host_path(root, p.substr(0, slash)))) {
          if (e.name == p.substr(slash + 1)) out.gds_mounts.push_back({p, host_path(root, p), true});
        }
      }
    }
  }
  if (config.mofed_enabled) {
    out.mofed = nodes("/dev/infiniband", [](const std::string& n) { return n.starts_with("uverbs") || n == "rdma_cm"; });
  }
  if (config.gdrcopy_enabled) out.gdrcopy = nodes("/dev", [](const std::string& n) { return n == "gdrdrv"; });
  if (!config.imex_channel_ids.empty()) {
    const auto present = list(host_path(dev, "/dev/nvidia-caps-imex-channels"));
    for (const int id : config.imex_channel_ids) {
      const std::string name = fmt::format("channel{}", id);
      const bool found = std::any_of(present.begin(), present.end(), [&](const DirEntry& e) { return e.name == name; });
      if (!found) {
        out.imex_missing.push_back(id);
        continue;
      }
      const std::string path = "/dev/nvidia-caps-imex-channels/" + name;
      out.imex_channels.push_back({id, {path, host_path(dev, path), "rw"}});
    }
  }
  return out;
}

int link_score(gpu::Link l) {
  switch (l) {
    case gpu::Link::kNvLink: return 100;
    case gpu::Link::kPcieSwitch: return 60;
    case gpu::Link::kPcieMulti: return 50;
    case gpu::Link::kHostBridge: return 40;
    case gpu::Link::kNumaNode: return 30;
    case gpu::Link::kSystem: return 10;
    case gpu::Link::kSelf:
    case gpu::Link::kUnknown: return 0;
  }
  return 0;
}

namespace {

int pair_score(const std::vector<std::vector<gpu::Link>>& topo, unsigned a, unsigned b) {
  if (a >= topo.size() || b >= topo[a].size()) return 0;
  return link_score(topo[a][b]);
}

int set_score(const std::vector<std::vector<gpu::Link>>& topo, const std::vector<const PlannedDevice*>& set) {
  int s = 0;
  for (size_t i = 0; i < set.size(); ++i) {
    for (size_t j = i + 1; j < set.size(); ++j) s += pair_score(topo, set[i]->gpu_index, set[j]->gpu_index);
  }
  return s;
}

// Whole devices: exhaustive over small candidate sets, greedy beyond.
std::vector<const PlannedDevice*> best_set(const std::vector<std::vector<gpu::Link>>& topo,
                                           std::vector<const PlannedDevice*> chosen,
                                           const std::vector<const PlannedDevice*>& candidates, size_t need) {
  if (need == 0) return chosen;
  if (need >= candidates.size()) {
    chosen.insert(chosen.end(), candidates.begin(), candidates.end());
    return chosen;
  }
  // Number of combinations, capped: enumerate when small.
  double combos = 1;
  for (size_t i = 0; i < need; ++i) combos = combos * static_cast<double>(candidates.size() - i) / (i + 1);
  if (combos <= 20000) {
    std::vector<size_t> idx(need);
    for (size_t i = 0; i < need; ++i) idx[i] = i;
    std::vector<const PlannedDevice*> best;
    int best_score = -1;
    while (true) {
      auto set = chosen;
      for (size_t i : idx) set.push_back(candidates[i]);
      if (const int s = set_score(topo, set); s > best_score) {
        best_score = s;
        best = std::move(set);
      }
      // Next combination in lexicographic order.
      size_t k = need;
      while (k > 0 && idx[k - 1] == candidates.size() - need + k - 1) --k;
      if (k == 0) break;
      ++idx[k - 1];
      for (size_t i = k; i < need; ++i) idx[i] = idx[i - 1] + 1;
    }
    return best;
  }
  std::vector<const PlannedDevice*> rest = candidates;
  while (need-- > 0) {
    size_t best = 0;
    int best_score = -1;
    for (size_t i = 0; i < rest.size(); ++i) {
      int s = 0;
      for (const auto* c : chosen) s += pair_score(topo, c->gpu_index, rest[i]->gpu_index);
      if (chosen.empty()) {
        for (const auto* o : rest) s += pair_score(topo, o->gpu_index, rest[i]->gpu_index);
      }
      if (s > best_score) {
        best_score = s;
        best = i;
      }
    }
    chosen.push_back(rest[best]);
    rest.erase(rest.begin() + static_cast<long>(best));
  }
  return chosen;
}

}  // namespace

std::vector<std::string> preferred_allocation(const PlannedResource& resource,
                                              const std::vector<std::vector<gpu::Link>>& topology,
                                              SharedPolicy policy, const std::vector<std::string>& available,
                                              const std::vector<std::string>& must_include, int size) {
  std::vector<const PlannedDevice*> chosen, candidates;
  std::set<std::string> picked;
  for (const auto& id : must_include) {
    if (const auto* d = resource.find(id); d != nullptr && picked.insert(id).second) chosen.push_back(d);
  }
  for (const auto& id : available) {
    if (const auto* d = resource.find(id); d != nullptr && !picked.contains(id)) {
      picked.insert(id);
      candidates.push_back(d);
    }
  }
  const size_t want = size > 0 ? static_cast<size_t>(size) : 0;
  const size_t need = want > chosen.size() ? want - chosen.size() : 0;

  const bool grouped = resource.mig || std::any_of(resource.devices.begin(), resource.devices.end(),
                                                   [](const PlannedDevice& d) { return d.replica >= 0; });
  std::vector<const PlannedDevice*> result;
  if (!grouped) {
    result = best_set(topology, chosen, candidates, need);
  } else {
    // Group key: the physical device for replicas, the parent GPU for MIG devices.
    auto key = [](const PlannedDevice* d) { return d->replica >= 0 ? d->uuid : d->gpu_uuid; };
    std::map<std::string, int> in_use;
    for (const auto& d : resource.devices) ++in_use[key(&d)];
    for (const auto* d : candidates) --in_use[key(d)];
    result = chosen;
    std::vector<const PlannedDevice*> rest = candidates;
    for (size_t n = 0; n < need && !rest.empty(); ++n) {
      size_t best = 0;
      for (size_t i = 1; i < rest.size(); ++i) {
        const int a = in_use[key(rest[i])], b = in_use[key(rest[best])];
        const bool better = policy == SharedPolicy::kDistributed ? a < b : a > b;
        if (better || (a == b && rest[i]->gpu_index < rest[best]->gpu_index)) best = i;
      }
      ++in_use[key(rest[best])];
      result.push_back(rest[best]);
      rest.erase(rest.begin() + static_cast<long>(best));
    }
  }
  std::vector<std::string> ids;
  for (const auto* d : result) ids.push_back(d->id);
  return ids;
}

}  // namespace kgpu::sharing
