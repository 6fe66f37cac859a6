// DevicePluginManager: what it writes on the node (the CDI spec, the GFD labels file) and the
// host facts it reads for them (driver files, MIG capability minors, containerd's config).
#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "agent/plugin_manager.h"
#include "common/files.h"
#include "common/log.h"
#include "gpu/mig.h"
#include "labels/labels.h"

namespace kgpu::agent {

namespace {

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') out.emplace_back(e->d_name);
    }
    ::closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

sharing::HostFacts DevicePluginManager::host_facts(const sharing::Config& c) const {
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
  h.mig_caps = sharing::parse_mig_minors(read_file(opt_.proc_root + "/driver/nvidia-caps/mig-minors").value_or(""));
  h.driver_mounts = sharing::discover_driver_files(root, [view](const std::string& dir) { return list_dir(view(dir)); });
  h.containerd_config = read_file(view("/etc/containerd/config.toml")).value_or("");
  for (const char* ctk : {"/usr/bin/nvidia-ctk", "/usr/local/nvidia/toolkit/nvidia-ctk"}) {
    if (h.exists(ctk)) {
      h.ldcache_hook = ctk;
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
  std::string text;
  {
    std::lock_guard lock(mu_);
    using sharing::ListStrategy;
    if (!config_.has_list_strategy(ListStrategy::kCdiCri) && !config_.has_list_strategy(ListStrategy::kCdiAnnotations)) {
      return;
    }
    text = sharing::cdi_spec(plan_, config_, host_);
  }
  const std::string path = fmt::format("{}/{}-{}.json", opt_.cdi_root, sharing::kCdiVendor, sharing::kCdiClass);
  if (auto ok = write_file_atomically(path, text); !ok) log::error("CDI spec: " + ok.error().message, {log::kv("file", path)});
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
