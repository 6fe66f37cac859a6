#include "sharing/allocate.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
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
    if (config.has_list_strategy(ListStrategy::kCdiAnnotations)) {
      std::vector<std::string> cdi;
      for (const auto& n : names) cdi.push_back(cdi_name(n));
      e.annotations[fmt::format("{}kgpu-device-plugin_{}-{}", config.cdi_annotation_prefix, unique, ci)] =
          fmt::format("{}", fmt::join(cdi, ","));
    }
    if (config.has_list_strategy(ListStrategy::kCdiCri)) {
      for (const auto& n : names) e.cdi_devices.push_back(cdi_name(n));
    }
    if (config.pass_device_specs && !cdi_only) {
      for (const auto* d : physical) {
        for (auto& n : device_nodes(*d, config, host)) e.devices.push_back(std::move(n));
      }
      for (auto& n : control_nodes(config, host)) e.devices.push_back(std::move(n));
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

std::string cdi_spec(const Plan& plan, const Config& config, const HostFacts& host) {
  using nlohmann::json;
  json devices = json::array();
  std::set<std::string> done;
  for (const auto& r : plan.resources) {
    for (const auto& d : r.devices) {
      if (!done.insert(d.uuid).second) continue;
      json nodes = json::array();
      for (const auto& n : device_nodes(d, config, host)) {
        nodes.push_back({{"path", n.container_path}, {"hostPath", n.host_path}, {"permissions", n.permissions}});
      }
      for (const auto& name : {d.uuid, d.index}) {
        devices.push_back({{"name", name}, {"containerEdits", {{"deviceNodes", nodes}}}});
      }
    }
  }
  json common_nodes = json::array();
  for (const auto& n : control_nodes(config, host)) {
    common_nodes.push_back({{"path", n.container_path}, {"hostPath", n.host_path}, {"permissions", n.permissions}});
  }
  json mounts = json::array();
  for (const auto& m : host.driver_mounts) {
    mounts.push_back({{"containerPath", m.container_path},
                      {"hostPath", m.host_path},
                      {"options", m.read_only ? json{"ro", "nosuid", "nodev", "bind"} : json{"nosuid", "nodev", "bind"}}});
  }
  json edits = {{"env", json::array({"NVIDIA_VISIBLE_DEVICES=void"})}, {"deviceNodes", common_nodes}};
  if (!mounts.empty()) edits["mounts"] = mounts;
  if (!host.ldcache_hook.empty()) {
    std::vector<std::string> dirs;
    for (const auto& m : host.driver_mounts) {
      const auto dir = m.container_path.substr(0, m.container_path.rfind('/'));
      if (dir != "/usr/bin" && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
    }
    json args = json::array({"nvidia-ctk", "hook", "update-ldcache"});
    for (const auto& d : dirs) {
      args.push_back("--folder");
      args.push_back(d);
    }
    edits["hooks"] = json::array({{{"hookName", "createContainer"}, {"path", host.ldcache_hook}, {"args", args}}});
  }
  json spec = {
      {"cdiVersion", "0.5.0"},
      {"kind", fmt::format("{}/{}", kCdiVendor, kCdiClass)},
      {"devices", devices},
      {"containerEdits", edits},
  };
  return spec.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

std::vector<MountEdit> discover_driver_files(const std::string& driver_root,
                                             const std::function<std::vector<std::string>(const std::string&)>& list) {
  static constexpr const char* kLibDirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64",
                                             "/lib64", "/usr/lib"};
  static constexpr const char* kLibs[] = {"libcuda.so.",         "libnvidia-ml.so.",      "libnvidia-ptxjitcompiler.so.",
                                          "libnvidia-nvvm.so.",  "libcudadebugger.so.",   "libnvidia-gpucomp.so.",
                                          "libnvidia-allocator.so.", "libnvidia-cfg.so.", "libnvidia-opencl.so."};
  static constexpr const char* kBins[] = {"nvidia-smi", "nvidia-debugdump", "nvidia-persistenced",
                                          "nvidia-cuda-mps-control", "nvidia-cuda-mps-server"};
  std::vector<MountEdit> out;
  std::set<std::string> seen;
  for (const char* dir : kLibDirs) {
    for (const auto& file : list(host_path(driver_root, dir))) {
      for (const char* lib : kLibs) {
        if (file.starts_with(lib) && seen.insert(file).second) {
          const std::string path = fmt::format("{}/{}", dir, file);
          out.push_back({path, host_path(driver_root, path), true});
        }
      }
    }
  }
  for (const char* bin : kBins) {
    for (const auto& file : list(host_path(driver_root, "/usr/bin"))) {
      if (file == bin) out.push_back({fmt::format("/usr/bin/{}", bin), host_path(driver_root, fmt::format("/usr/bin/{}", bin)), true});
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
