// DevicePluginManager: what it writes on the node (the CDI spec, the GFD labels file) and the
// host facts it reads for them (driver files, MIG capability minors, containerd's config).
#include <dirent.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <filesystem>

#include "agent/plugin_manager.h"
#include "common/files.h"
#include "common/log.h"
#include "gpu/mig.h"
#include "labels/labels.h"

namespace kgpu::agent {

std::vector<sharing::DirEntry> list_driver_dir(const std::string& dir) {
  std::vector<sharing::DirEntry> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') continue;
      sharing::DirEntry entry{e->d_name, ""};
      // Bounded: a driver directory holds a few hundred entries; a huge one is cut, not read on.
      if (out.size() >= 65536) break;
      if (e->d_type == DT_LNK || e->d_type == DT_UNKNOWN) {
        char buf[4096];
        const std::string path = dir + "/" + e->d_name;
        if (const ssize_t n = ::readlink(path.c_str(), buf, sizeof buf); n > 0 && static_cast<size_t>(n) < sizeof buf) {
          entry.link.assign(buf, static_cast<size_t>(n));
        }
      }
      out.push_back(std::move(entry));
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.name < y.name; });
  return out;
}

namespace {

// The optional device classes' spec files this agent writes besides the GPU spec.
constexpr const char* kExtraClasses[] = {"gds", "mofed", "gdrcopy", sharing::kImexChannelClass};

}  // namespace

sharing::HostFacts DevicePluginManager::host_facts(const sharing::Config& c, const gpu::Inventory& inv) const {
  return node_host_facts(c, inv, opt_.proc_root, opt_.pci_devices_dir);
}

sharing::HostFacts node_host_facts(const sharing::Config& c, const gpu::Inventory& inv, const std::string& proc_root,
                                   const std::string& pci_devices_dir) {
  sharing::HostFacts h;
  // Host paths as this process sees them: under containerDriverRoot when the driver root is
  // mounted there (in the DaemonSet), else unchanged (the agent runs on the host).
  const std::string root = c.nvidia_driver_root, mount = c.container_driver_root;
  struct stat st {};
  const bool mounted = !mount.empty() && ::stat(mount.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
  auto view = [root, mount, mounted](const std::string& host) {
    if (!mounted) return host;
    const std::string r = root == "/" ? "" : root;
    if (!host.starts_with(r)) return host;
    return mount + host.substr(r.size());
  };
  h.exists = [view](const std::string& p) { return ::access(view(p).c_str(), F_OK) == 0; };
  h.mig_caps = sharing::parse_mig_minors(read_file(proc_root + "/driver/nvidia-caps/mig-minors").value_or(""));
  const sharing::ListDir list = [view](const std::string& dir) { return list_driver_dir(view(dir)); };
  h.driver = sharing::discover_driver_files(root, inv.driver_version, list);
  h.extra = sharing::discover_extra_devices(c, root, list);
  for (const auto& g : inv.gpus) {
    // sysfs is the container's own (the host's, as containers see it); not under the driver root.
    auto drm = sharing::discover_drm_nodes(c, g.pci.bus_id, pci_devices_dir, [&](const std::string& dir) {
      return dir.starts_with(pci_devices_dir) ? list_driver_dir(dir) : list(dir);
    });
    if (drm.empty()) continue;
    auto links = sharing::discover_drm_links(c, g.pci.bus_id, drm, list);
    if (!links.empty()) h.drm_links[g.index] = std::move(links);
    h.drm_nodes[g.index] = std::move(drm);
  }
  h.containerd_config = read_file(view("/etc/containerd/config.toml")).value_or("");
  // NVIDIA's hook tool, newest form first (nvidia-cdi-hook, then nvidia-ctk's `hook` command).
  for (const char* tool : {"/usr/bin/nvidia-cdi-hook", "/usr/local/nvidia/toolkit/nvidia-cdi-hook", "/usr/bin/nvidia-ctk",
                           "/usr/local/nvidia/toolkit/nvidia-ctk"}) {
    if (h.exists(tool)) {
      h.hook_tool = tool;
      break;
    }
  }
  return h;
}

bool DevicePluginManager::facts_nodes_differ(const sharing::HostFacts& facts) const {
  return sharing::present_control_nodes(config_, facts) != sharing::present_control_nodes(config_, host_);
}

void DevicePluginManager::write_cdi_spec() {
  if (opt_.cdi_root.empty()) return;
  Result<std::vector<sharing::CdiSpecFile>> specs;
  {
    std::lock_guard lock(mu_);
    using sharing::ListStrategy;
    if (!config_.has_list_strategy(ListStrategy::kCdiCri) && !config_.has_list_strategy(ListStrategy::kCdiAnnotations)) {
      return;
    }
    specs = sharing::cdi_specs(plan_, config_, host_);
  }
  if (!specs) {
    // The files in place (the last good specs) stay: a spec CDI runtimes reject would fail every
    // GPU container of the node, a stale one fails only the device that changed.
    bool repeated = false;
    {
      std::lock_guard lock(mu_);
      repeated = cdi_error_ == specs.error().message;
      cdi_error_ = specs.error().message;
    }
    if (!repeated) log::error(specs.error().message + "; keeping the specs in place", {log::kv("dir", opt_.cdi_root)});
    return;
  }
  std::string error;
  std::set<std::string> written;
  for (const auto& f : *specs) {
    const std::string path = opt_.cdi_root + "/" + f.name;
    written.insert(f.name);
    if (auto ok = write_file_atomically(path, f.text); !ok) {
      error = "CDI spec: " + ok.error().message;
      log::error(error, {log::kv("file", path)});
    }
  }
  // A class no longer produced (switched off, its device nodes gone) must not stay resolvable.
  for (const char* cls : kExtraClasses) {
    const std::string name = fmt::format("{}-{}.json", sharing::kCdiVendor, cls);
    if (written.contains(name)) continue;
    std::error_code ec;
    std::filesystem::remove(opt_.cdi_root + "/" + name, ec);
  }
  bool was_failing = false;
  {
    std::lock_guard lock(mu_);
    was_failing = !cdi_error_.empty();
    cdi_error_ = error;
  }
  if (was_failing && error.empty()) log::info("CDI spec written again", {log::kv("dir", opt_.cdi_root)});
}

Result<void> DevicePluginManager::check_imex(const sharing::Config& c, const sharing::HostFacts& facts) const {
  if (facts.extra.imex_missing.empty()) return {};
  std::vector<std::string> paths;
  for (const int id : facts.extra.imex_missing) {
    paths.push_back(fmt::format("{}/dev/nvidia-caps-imex-channels/channel{}", c.dev_root() == "/" ? "" : c.dev_root(), id));
  }
  const std::string what = fmt::format("IMEX channel{} {} not found", paths.size() > 1 ? "s" : "", fmt::join(paths, ", "));
  if (c.imex_required) {
    return fail(ErrorCode::kNotFound, "{}: imex.required is set (create the channel: the nvidia driver's "
                "NVreg_CreateImexChannel0=1, or nvidia-modprobe -i <id>)", what);
  }
  log::warn(what + ": not given to containers (imex.required is false)");
  return {};
}

void DevicePluginManager::write_labels() {
  if (!opt_.labels) return;
  labels::Labels out;
  std::string path;
  std::vector<std::string> warnings;
  {
    std::lock_guard lock(mu_);
    // No plan yet (the config or the GPUs could not be read at start): the file a previous run
    // wrote stays as it is until there is an inventory to label.
    if (generation_ == 0) return;
    path = config_.gfd_output_file;
    labels::LabelSharing ls;
    labels::LabelOptions lo;
    lo.mig_strategy = sharing::mig_strategy_name(config_.mig_strategy);
    lo.machine = labels::read_machine_type(config_.gfd_machine_type_file);
    for (const auto& g : inventory_.gpus) {
      if (auto c = labels::read_pci_class(g.pci.bus_id, opt_.pci_devices_dir)) lo.pci_class[g.index] = *c;
    }
    if (!config_.gfd_no_timestamp) {
      lo.timestamp = std::chrono::duration_cast<std::chrono::seconds>(
                         clock_.system_now().time_since_epoch())
                         .count();
    }
    std::map<unsigned, int> replicas;
    bool renamed = false;
    for (const auto& r : plan_.resources) {
      for (const auto& d : r.devices) {
        if (d.replica >= 0 && d.mig_gi && config_.mig_strategy == sharing::MigStrategy::kMixed) {
          for (const auto& g : inventory_.gpus) {
            for (const auto& m : g.mig_devices) {
              if (m.uuid != d.uuid) continue;
              ls.mig_replicas[gpu::mig::resource_profile(m.profile)] = d.replicas;
              ls.renamed = ls.renamed || !r.name.starts_with("nvidia.com/mig-") || r.name.ends_with(".shared");
            }
          }
        }
        if (d.replica < 0 || d.mig_gi) continue;
        replicas[d.gpu_index] = d.replicas;
        renamed = renamed || r.name != "nvidia.com/gpu";
        ls.strategy = sharing::sharing_kind_name(r.sharing);
      }
    }
    if (!replicas.empty()) {
      int lo_r = INT32_MAX, hi_r = 0;
      for (const auto& [i, n] : replicas) {
        lo_r = std::min(lo_r, n);
        hi_r = std::max(hi_r, n);
      }
      ls.replicas = lo_r;
      if (lo_r != hi_r || replicas.size() != inventory_.gpus.size()) {
        ls.replicas_by_gpu = replicas;
        for (const auto& g : inventory_.gpus) ls.replicas_by_gpu.try_emplace(g.index, 1);
      }
      ls.renamed = renamed;
    }
    out = labels::gfd_labels(inventory_, ls, lo, &warnings);
  }
  for (const auto& w : warnings) {
    if (!labels_dir_missing_logged_) log::warn("labels: " + w);
  }
  const auto dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    if (!labels_dir_missing_logged_) {
      log::warn(fmt::format("labels: not written: {} does not exist (is Node Feature Discovery installed and its "
                            "features.d directory mounted?)",
                            dir.string()));
    }
    labels_dir_missing_logged_ = true;
    return;
  }
  labels_dir_missing_logged_ = false;
  if (auto ok = labels::write_features_file(path, out); !ok) log::error("labels: " + ok.error().message, {log::kv("file", path)});
}

bool DevicePluginManager::remove_labels() {
  if (!opt_.labels) return false;
  // --output-file wins over any config, applied or not (a config that never applied leaves config_
  // at the defaults).
  std::string path;
  if (opt_.overrides.gfd_output_file) {
    path = *opt_.overrides.gfd_output_file;
  } else {
    std::lock_guard lock(mu_);
    path = config_.gfd_output_file;
  }
  std::error_code ec;
  const bool removed = std::filesystem::remove(path, ec);
  if (ec) log::error(fmt::format("labels: {} not removed: {}", path, ec.message()), {log::kv("file", path)});
  return removed;
}

}  // namespace kgpu::agent
