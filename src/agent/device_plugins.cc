#include "agent/device_plugins.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "common/files.h"
#include "common/strings.h"
#include "gpu/mig.h"
#include "labels/labels.h"

namespace kgpu::agent {

namespace {

using Clock = std::chrono::steady_clock;

template <typename... Args>
void log(fmt::format_string<Args...> f, Args&&... args) {
  fmt::print(stderr, "kgpu agent: {}\n", fmt::format(f, std::forward<Args>(args)...));
}

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

// Whether two inventories have the same devices to advertise (GPUs, MIG modes and MIG devices).
bool same_layout(const gpu::Inventory& a, const gpu::Inventory& b) {
  if (a.gpus.size() != b.gpus.size()) return false;
  for (size_t i = 0; i < a.gpus.size(); ++i) {
    const auto &x = a.gpus[i], &y = b.gpus[i];
    if (x.lost || y.lost || x.uuid.empty() || y.uuid.empty()) continue;  // judged by health, not layout
    if (x.uuid != y.uuid || x.mig_enabled != y.mig_enabled || x.mig_devices.size() != y.mig_devices.size()) {
      return false;
    }
    for (size_t k = 0; k < x.mig_devices.size(); ++k) {
      if (x.mig_devices[k].uuid != y.mig_devices[k].uuid) return false;
    }
  }
  return true;
}

// A lost GPU reads without UUID or MIG devices: keep what we knew, so its devices stay advertised
// (as Unhealthy) instead of vanishing from the kubelet's capacity.
gpu::Inventory merge_lost(gpu::Inventory fresh, const gpu::Inventory& known) {
  for (auto& g : fresh.gpus) {
    if (!g.lost && !g.uuid.empty()) continue;
    for (const auto& k : known.gpus) {
      if (k.index == g.index && !k.uuid.empty()) {
        const bool lost = g.lost;
        const auto error = g.error;
        g = k;
        g.lost = lost;
        g.error = error;
      }
    }
  }
  return fresh;
}

// The sharing layer's container edits in the kubelet's Allocate terms.
std::vector<kubelet::ContainerAllocation> to_kubelet(const std::vector<sharing::ContainerEdits>& edits) {
  std::vector<kubelet::ContainerAllocation> out;
  out.reserve(edits.size());
  for (const auto& e : edits) {
    kubelet::ContainerAllocation a;
    a.envs = e.envs;
    a.annotations = e.annotations;
    a.cdi_devices = e.cdi_devices;
    for (const auto& m : e.mounts) a.mounts.push_back({m.container_path, m.host_path, m.read_only});
    for (const auto& d : e.devices) a.devices.push_back({d.container_path, d.host_path, d.permissions});
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace

DevicePluginManager::FileStamp DevicePluginManager::stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<unsigned long>(st.st_ino),
          static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
          static_cast<long long>(st.st_size)};
}

const std::set<uint64_t>& reset_required_xids() {
  static const std::set<uint64_t> kReset{48, 62, 64, 74, 79, 92, 95, 119, 120, 140};
  return kReset;
}

const std::set<uint64_t>& default_ignored_xids() {
  static const std::set<uint64_t> kIgnored{13, 31, 43, 45, 68, 109};
  return kIgnored;
}

DevicePluginManager::DevicePluginManager(gpu::Node& node, DevicePluginOptions options)
    : node_(node), opt_(std::move(options)) {
  mps_ = opt_.mps;
  if (mps_ == nullptr) {
    own_mps_ = std::make_unique<RealMpsControl>();
    mps_ = own_mps_.get();
  }
  ignored_xids_ = default_ignored_xids();
  // NVIDIA's reading: case-insensitive; "all" or "xids" anywhere disables XID health; otherwise a
  // comma-separated list of more XIDs to ignore. DP_ENABLE_HEALTHCHECKS lists XIDs to watch even
  // though they are ignored by default.
  std::string dh = trim(opt_.disable_health_checks);
  std::transform(dh.begin(), dh.end(), dh.begin(), [](unsigned char c) { return std::tolower(c); });
  auto xids = [](const std::string& list, const char* var) {
    std::set<uint64_t> out;
    std::stringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
      if (trim(item).empty()) continue;
      try {
        out.insert(std::stoull(trim(item)));
      } catch (const std::exception&) {
        log("{}: '{}' is not an XID number; ignored", var, item);
      }
    }
    return out;
  };
  if (dh.find("all") != std::string::npos || dh.find("xids") != std::string::npos) {
    xid_health_ = false;
  } else {
    for (auto x : xids(dh, "DP_DISABLE_HEALTHCHECKS")) ignored_xids_.insert(x);
  }
  for (auto x : xids(opt_.enable_health_checks, "DP_ENABLE_HEALTHCHECKS")) ignored_xids_.erase(x);
}

DevicePluginManager::~DevicePluginManager() { stop(); }

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

void DevicePluginManager::start_event_watcher() {
  if (events_) events_->stop();
  events_.reset();
  if (!xid_health_) return;
  auto w = gpu::EventWatcher::start(node_, [this](const gpu::Event& e) { on_event(e); });
  if (w) {
    events_ = std::move(*w);
    for (const auto& e : events_->registration_errors()) log("health: {}", e);
  } else {
    log("health: no XID events ({}); devices are checked by polling only", w.error().message);
  }
}

bool fails_on_init_error(const DevicePluginOptions& options, const std::string& config_text) {
  if (options.overrides.fail_on_init_error) {
    const auto& v = *options.overrides.fail_on_init_error;
    return v != "false" && v != "0";
  }
  if (options.config_file.empty()) return true;
  auto parsed = sharing::parse_config(config_text, options.config_file);
  return !parsed || parsed->fail_on_init_error;
}

Result<void> DevicePluginManager::start() {
  kubelet_stamp_ = stamp(opt_.plugin_dir + "/" + kubelet::kKubeletSocketName);
  if (auto ok = load_and_apply(true); !ok) {
    // failOnInitError (flag, variable, else the file's, default true) decides whether a node that
    // cannot be planned stops the agent or keeps serving metrics while the config is retried.
    if (fails_on_init_error(opt_, config_text_attempt_)) return ok;
    log("device plugin not started: {}; failOnInitError is false: serving metrics and retrying the config",
        ok.error().message);
    std::lock_guard lock(mu_);
    last_reload_error_ = ok.error().message;
    last_rejected_text_ = config_text_attempt_;
  }
  {
    std::lock_guard lock(mu_);
    using sharing::ListStrategy;
    if (config_.has_list_strategy(ListStrategy::kCdiCri) || config_.has_list_strategy(ListStrategy::kCdiAnnotations)) {
      if (auto w = sharing::cdi_runtime_warning(host_.containerd_config)) log("warning: {}", *w);
    }
  }
  if (xid_health_) {
    start_event_watcher();
  } else {
    log("health: XID health checks disabled by DP_DISABLE_HEALTHCHECKS={}", opt_.disable_health_checks);
  }
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { control_loop(); });
  return {};
}

void DevicePluginManager::stop() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (events_) events_->stop();
  events_.reset();
  // MPS daemons are left running: their clients outlive the agent (a rolling update).
  for (auto& [name, server] : servers_) server->stop();
  servers_.clear();
}

Result<void> DevicePluginManager::load_and_apply(bool initial) {
  std::string text;
  sharing::Config config;
  config.source = "defaults";
  if (!opt_.config_file.empty()) {
    // Stamp first: a change after this point is seen by the next check_config().
    if (initial) config_stamp_ = stamp(opt_.config_file);
    struct stat st {};
    if (::stat(opt_.config_file.c_str(), &st) != 0) {
      // An optional ConfigMap that is not there (yet): the defaults, until the file appears.
      if (initial || !config_text_.empty()) {
        log("config file {} does not exist: using the defaults; the file is watched", opt_.config_file);
      }
    } else if (!S_ISREG(st.st_mode)) {
      return fail(ErrorCode::kInvalidArgument, "config file {} is not a regular file (a directory? name the file in it)",
                  opt_.config_file);
    } else {
      auto read = read_file_limited(opt_.config_file, sharing::kMaxConfigBytes);
      if (!read) return std::unexpected(read.error().wrap("config file"));
      text = std::move(*read);
      config_text_attempt_ = text;
      auto parsed = sharing::parse_config(text, opt_.config_file);
      if (!parsed) return std::unexpected(parsed.error());
      config = std::move(*parsed);
    }
  }
  if (auto ok = sharing::finalize(config, opt_.overrides); !ok) return std::unexpected(ok.error());
  auto inv = node_.inventory();
  if (!inv) return std::unexpected(inv.error().wrap("reading the GPUs"));
  gpu::Inventory merged;
  {
    std::lock_guard lock(mu_);
    merged = merge_lost(std::move(*inv), inventory_);
  }
  auto plan = sharing::make_plan(merged, config);
  if (!plan) return std::unexpected(plan.error());
  for (const auto& w : config.warnings) log("config: {}", w);
  for (const auto& w : plan->warnings) log("plan: {}", w);
  config_text_ = text;
  if (!initial) {
    log("config {}: applied", config.source);
    std::lock_guard lock(mu_);
    ++reloads_ok_;
    last_rejected_text_.reset();
  }
  apply_plan(std::move(*plan), std::move(config), std::move(merged));
  return {};
}

std::vector<kubelet::DeviceState> DevicePluginManager::device_states(const sharing::PlannedResource& r) const {
  std::vector<kubelet::DeviceState> out;
  auto ok = [&](const std::string& uuid) {
    auto it = health_.find(uuid);
    return it == health_.end() || it->second.healthy;
  };
  for (const auto& d : r.devices) out.push_back({d.id, ok(d.uuid) && ok(d.gpu_uuid), d.numa_node});
  return out;
}

void DevicePluginManager::apply_plan(sharing::Plan plan, sharing::Config config, gpu::Inventory inventory) {
  sharing::HostFacts facts = host_facts(config);
  sharing::Plan old;
  std::map<std::string, std::vector<kubelet::DeviceState>> states;
  {
    std::lock_guard lock(mu_);
    old = std::move(plan_);
    plan_ = std::move(plan);
    config_ = std::move(config);
    inventory_ = std::move(inventory);
    host_ = std::move(facts);
    ++generation_;
    last_reload_error_.clear();
    for (const auto& r : plan_.resources) states[r.name] = device_states(r);
  }
  // The CDI spec first: the kubelet may allocate (and the runtime resolve CDI names) as soon as a
  // resource is registered.
  write_cdi_spec();
  // Resources that are gone.
  for (const auto& r : old.resources) {
    if (plan_.find(r.name) != nullptr) continue;
    if (auto it = servers_.find(r.name); it != servers_.end()) {
      it->second->stop();
      servers_.erase(it);
      log("{}: no longer advertised", r.name);
    }
    if (r.sharing == sharing::SharingKind::kMps) mps_->remove(config_.mps_root, r.name);
    std::lock_guard lock(mu_);
    registered_.erase(r.name);
  }
  for (const auto& r : plan_.resources) {
    const sharing::PlannedResource* before = old.find(r.name);
    auto it = servers_.find(r.name);
    if (r.sharing == sharing::SharingKind::kMps) {
      if (auto ok = mps_->apply(config_.mps_root, r); !ok) log("{}: MPS: {}", r.name, ok.error().message);
    } else if (before != nullptr && before->sharing == sharing::SharingKind::kMps) {
      mps_->remove(config_.mps_root, r.name);
    }
    if (it != servers_.end()) {
      // The kubelet takes any new device list through the open ListAndWatch stream; restarting the
      // server would make it mark the resource unhealthy until we register again.
      if (before != nullptr && !sharing::same_advertisement(*before, r)) {
        log("{}: now {} devices (was {})", r.name, r.devices.size(), before->devices.size());
      }
      it->second->set_devices(states[r.name]);
      continue;
    }
    const std::string name = r.name;
    kubelet::PluginCallbacks cb;
    cb.allocate = [this, name](const std::vector<std::vector<std::string>>& requests) {
      std::lock_guard lock(mu_);
      const auto* res = plan_.find(name);
      if (res == nullptr) {
        ++allocation_errors_;
        return Result<std::vector<kubelet::ContainerAllocation>>(
            fail(ErrorCode::kUnavailable, "{} is no longer advertised by this node", name));
      }
      auto edits = sharing::allocate(*res, config_, host_, requests, fmt::format("{:x}", ++unique_));
      ++(edits ? allocations_ : allocation_errors_);
      if (!edits) {
        log("{}: Allocate refused: {}", name, edits.error().message);
        return Result<std::vector<kubelet::ContainerAllocation>>(std::unexpected(edits.error()));
      }
      return Result<std::vector<kubelet::ContainerAllocation>>(to_kubelet(*edits));
    };
    cb.preferred = [this, name](const std::vector<std::string>& available, const std::vector<std::string>& must,
                                int size) {
      std::lock_guard lock(mu_);
      const auto* res = plan_.find(name);
      if (res == nullptr) return std::vector<std::string>{};
      return sharing::preferred_allocation(*res, inventory_.topology, config_.shared_policy, available, must, size);
    };
    auto server = std::make_unique<kubelet::DevicePluginServer>(name, opt_.plugin_dir, r.socket_name, std::move(cb));
    server->set_devices(states[name]);
    if (auto ok = server->start(); !ok) {
      log("{}", ok.error().message);
      serve_error_[name] = ok.error().message;
    } else {
      log("{}: serving {} devices on {}", name, r.devices.size(), server->socket_path());
      register_one(*server);
    }
    servers_[name] = std::move(server);
  }
  write_labels();
}

bool DevicePluginManager::register_one(kubelet::DevicePluginServer& server) {
  if (!server.running() && !server.start()) return false;
  auto ok = server.register_with_kubelet(opt_.register_timeout);
  std::lock_guard lock(mu_);
  const bool was = registered_[server.resource()];
  registered_[server.resource()] = ok.has_value();
  if (ok) {
    ++registrations_;
    log("{}: registered with the kubelet", server.resource());
  } else if (was || ok.error().code != ErrorCode::kUnavailable) {
    log("{}", ok.error().message);
  }
  return ok.has_value();
}

void DevicePluginManager::control_loop() {
  const auto now0 = Clock::now();
  next_config_check_ = now0 + opt_.config_poll_interval;
  next_health_ = now0 + opt_.health_interval;
  next_register_ = now0 + std::chrono::seconds(1);
  {
    std::lock_guard lock(mu_);
    next_labels_ = now0 + config_.gfd_sleep_interval;
  }
  while (true) {
    {
      std::unique_lock lock(stop_mu_);
      stop_cv_.wait_for(lock, opt_.poll_interval, [&] { return stopping_ || dirty_; });
      if (stopping_) return;
      dirty_ = false;
    }
    const auto now = Clock::now();
    check_sockets();
    if (now >= next_config_check_) {
      next_config_check_ = now + opt_.config_poll_interval;
      check_config();
    }
    if (now >= next_health_) {
      next_health_ = now + opt_.health_interval;
      check_health();
    }
    push_devices();
    bool labels_due = false;
    {
      std::lock_guard lock(mu_);
      if (now >= next_labels_ && !config_.gfd_oneshot) {
        next_labels_ = now + config_.gfd_sleep_interval;
        labels_due = true;
      }
    }
    if (labels_due) write_labels();
  }
}

void DevicePluginManager::check_sockets() {
  const std::string kubelet = opt_.plugin_dir + "/" + kubelet::kKubeletSocketName;
  const FileStamp now_stamp = stamp(kubelet);
  const bool kubelet_new = now_stamp.inode != 0 && !(now_stamp == kubelet_stamp_);
  if (kubelet_new && kubelet_stamp_.inode != 0) log("the kubelet restarted ({} was re-created): registering again", kubelet);
  kubelet_stamp_ = now_stamp;
  const bool retry_due = Clock::now() >= next_register_;
  if (retry_due) next_register_ = Clock::now() + std::chrono::seconds(1);
  for (auto& [name, server] : servers_) {
    bool again = kubelet_new;
    if (!server->running() || !server->socket_present()) {
      // Serving failed before (retried once a second, logged when the reason changes), or the
      // socket was deleted (a restarting kubelet does that).
      if (server->running()) log("{}: socket {} was removed: serving again", name, server->socket_path());
      if (!server->running() && !retry_due) continue;
      if (auto ok = server->start(); !ok) {
        if (serve_error_[name] != ok.error().message) log("{}", ok.error().message);
        serve_error_[name] = ok.error().message;
        continue;
      }
      if (!serve_error_[name].empty()) log("{}: serving on {}", name, server->socket_path());
      serve_error_[name].clear();
      again = true;
    }
    if (server->stream_lost(std::chrono::seconds(2))) {
      // The kubelet closed ListAndWatch and did not come back (without deleting our socket):
      // only a new registration makes it connect again.
      log("{}: the kubelet closed its ListAndWatch stream: registering again", name);
      server->forget_streams();
      again = true;
    }
    bool registered = false;
    {
      std::lock_guard lock(mu_);
      registered = registered_[name];
      if (again) registered_[name] = false;
    }
    if (again || (!registered && retry_due && now_stamp.inode != 0)) register_one(*server);
  }
}

void DevicePluginManager::check_config() {
  if (opt_.config_file.empty()) return;
  const FileStamp s = stamp(opt_.config_file);
  // The stamp catches every change but one within the file system's timestamp granularity that
  // keeps the size; the periodic full read catches that one too.
  const auto now = Clock::now();
  if (s == config_stamp_ && now < next_full_config_read_) return;
  next_full_config_read_ = now + std::chrono::seconds(10);
  config_stamp_ = s;
  std::string text;
  if (s.inode != 0) {
    // An unreadable or oversized file is keyed by its error, so it is rejected (and logged) once.
    auto read = read_file_limited(opt_.config_file, sharing::kMaxConfigBytes);
    text = read ? std::move(*read) : "\x01" + read.error().message;
  }
  {
    std::lock_guard lock(mu_);
    if (text == config_text_ && generation_ > 0) {
      // Back to the config in use (e.g. a bad edit reverted): nothing to apply, nothing wrong.
      last_reload_error_.clear();
      last_rejected_text_.reset();
      return;
    }
    if (last_rejected_text_ && *last_rejected_text_ == text) return;  // rejected already: not again
  }
  auto applied = load_and_apply(false);
  if (applied) return;
  std::lock_guard lock(mu_);
  log("config rejected: {}; keeping the last good config (generation {})", applied.error().message, generation_);
  ++reloads_failed_;
  last_reload_error_ = applied.error().message;
  last_rejected_text_ = text;
}

bool DevicePluginManager::facts_nodes_differ(const sharing::HostFacts& facts) const {
  return sharing::present_control_nodes(config_, facts) != sharing::present_control_nodes(config_, host_);
}

void DevicePluginManager::mark_bad(const std::string& uuid, const std::string& reason, bool needs_reset) {
  auto& h = health_[uuid];
  if (needs_reset) h.needs_reset = true;
  if (h.healthy) {
    ++unhealthy_transitions_;
    log("device {} marked Unhealthy: {}", uuid, reason);
  }
  h.healthy = false;
  h.reason = reason;
  h.last_bad = Clock::now();
}

void DevicePluginManager::on_event(const gpu::Event& e) {
  {
    std::lock_guard lock(mu_);
    const gpu::GpuInfo* gpu = nullptr;
    for (const auto& g : inventory_.gpus) {
      if ((!e.uuid.empty() && g.uuid == e.uuid) || (e.uuid.empty() && e.gpu_index && g.index == *e.gpu_index)) gpu = &g;
    }
    switch (e.kind) {
      case gpu::EventKind::kXid: {
        if (ignored_xids_.contains(e.xid)) return;
        const std::string reason = fmt::format("XID {}", e.xid);
        const bool reset = reset_required_xids().contains(e.xid);
        if (gpu == nullptr) {
          for (const auto& g : inventory_.gpus) mark_bad(g.uuid, reason + " (GPU unknown)");
          break;
        }
        bool marked = false;
        if (e.gpu_instance_id) {
          for (const auto& m : gpu->mig_devices) {
            if (m.gpu_instance_id == *e.gpu_instance_id &&
                (!e.compute_instance_id || m.compute_instance_id == *e.compute_instance_id)) {
              mark_bad(m.uuid, reason, reset);
              marked = true;
            }
          }
        }
        if (!marked) mark_bad(gpu->uuid, reason, reset);
        break;
      }
      case gpu::EventKind::kGpuLost:
        if (gpu != nullptr) {
          mark_bad(gpu->uuid, "GPU lost");
        } else {
          for (const auto& g : inventory_.gpus) mark_bad(g.uuid, e.message);
        }
        break;
      case gpu::EventKind::kError:
        // NVIDIA's rule: an event wait that fails for another reason than a timeout makes every
        // device Unhealthy (the health signal itself is gone).
        for (const auto& g : inventory_.gpus) mark_bad(g.uuid, e.message);
        break;
      case gpu::EventKind::kSingleBitEcc:
      case gpu::EventKind::kDoubleBitEcc:
        return;  // ECC faults arrive as XIDs (48, 63, 64, 94, 95) when they matter
    }
  }
  {
    std::lock_guard lock(stop_mu_);
    dirty_ = true;
  }
  stop_cv_.notify_all();  // the control thread pushes the new lists at once
}

void DevicePluginManager::check_health() {
  auto fresh = node_.inventory();
  std::vector<std::pair<unsigned, std::string>> gpus;
  {
    std::lock_guard lock(mu_);
    for (const auto& g : inventory_.gpus) gpus.emplace_back(g.index, g.uuid);
  }
  std::map<std::string, bool> answering;
  for (const auto& [index, uuid] : gpus) {
    const auto p = node_.probe(index);
    std::lock_guard lock(mu_);
    if (p.error) {
      mark_bad(uuid, p.lost ? "GPU lost (fell off the bus)" : *p.error);
      health_[uuid].was_lost = true;
    } else if (p.uuid != uuid) {
      mark_bad(uuid, fmt::format("GPU {} now answers as {}", index, p.uuid));
    } else if (p.remap_pending.value_or(false)) {
      mark_bad(uuid, "row remapping pending: the GPU needs a reset");
    } else {
      answering[uuid] = true;
    }
  }
  {
    std::lock_guard lock(mu_);
    const auto now = Clock::now();
    for (auto& [uuid, h] : health_) {
      if (h.healthy || opt_.health_recovery.count() == 0 || now - h.last_bad < opt_.health_recovery) continue;
      // An XID whose remedy is a GPU reset keeps the device out until the GPU went away and came
      // back (a reset or re-enumeration), as seen by the probe.
      if (h.needs_reset && !h.was_lost) continue;
      // A MIG device recovers when its parent GPU answers.
      std::string gpu_uuid = uuid;
      for (const auto& g : inventory_.gpus) {
        for (const auto& m : g.mig_devices) {
          if (m.uuid == uuid) gpu_uuid = g.uuid;
        }
      }
      if (!answering.contains(gpu_uuid)) continue;
      h.healthy = true;
      h.needs_reset = h.was_lost = false;
      ++recoveries_;
      log("device {} returned to Healthy: no fault for {} s ({} before)", uuid,
          std::chrono::duration_cast<std::chrono::seconds>(opt_.health_recovery).count(), h.reason);
    }
  }
  // Host facts change under us: the UVM device nodes appear on first use, a driver upgrade renames
  // the libraries. Rewrite the CDI spec when they do.
  {
    sharing::Config config;
    {
      std::lock_guard lock(mu_);
      config = config_;
    }
    sharing::HostFacts facts = host_facts(config);
    bool differ = false;
    {
      std::lock_guard lock(mu_);
      differ = !(facts == host_) || facts_nodes_differ(facts);
      if (differ) host_ = std::move(facts);
    }
    if (differ) write_cdi_spec();
  }
  if (!fresh) return;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = !same_layout(*fresh, inventory_);
  }
  if (!changed) return;
  log("the GPU layout changed (MIG reconfiguration or GPUs replaced): planning again");
  sharing::Config config;
  gpu::Inventory merged;
  {
    std::lock_guard lock(mu_);
    config = config_;
    merged = merge_lost(std::move(*fresh), inventory_);
  }
  auto plan = sharing::make_plan(merged, config);
  if (!plan) {
    std::lock_guard lock(mu_);
    last_reload_error_ = plan.error().message;
    log("the new GPU layout cannot be advertised: {}; keeping the previous plan", plan.error().message);
    return;
  }
  apply_plan(std::move(*plan), std::move(config), std::move(merged));
  start_event_watcher();  // event registrations do not survive a GPU reset or MIG re-layout
}

void DevicePluginManager::push_devices() {
  std::map<std::string, std::vector<kubelet::DeviceState>> states;
  {
    std::lock_guard lock(mu_);
    for (const auto& r : plan_.resources) states[r.name] = device_states(r);
  }
  for (auto& [name, server] : servers_) {
    if (auto it = states.find(name); it != states.end()) server->set_devices(std::move(it->second));
  }
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
  if (auto ok = write_file_atomically(path, text); !ok) log("CDI spec: {}", ok.error().message);
}

void DevicePluginManager::write_labels() {
  if (!opt_.labels) return;
  labels::Labels out;
  std::string path;
  std::vector<std::string> warnings;
  {
    std::lock_guard lock(mu_);
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
                         std::chrono::system_clock::now().time_since_epoch())
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
    if (!labels_dir_missing_logged_) log("labels: {}", w);
  }
  const auto dir = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    if (!labels_dir_missing_logged_) {
      log("labels: not written: {} does not exist (is Node Feature Discovery installed and its features.d "
          "directory mounted?)",
          dir.string());
    }
    labels_dir_missing_logged_ = true;
    return;
  }
  labels_dir_missing_logged_ = false;
  if (auto ok = labels::write_features_file(path, out); !ok) log("labels: {}", ok.error().message);
}

DevicePluginManager::Status DevicePluginManager::status() const {
  std::lock_guard lock(mu_);
  Status s;
  s.config_generation = generation_;
  s.last_reload_error = last_reload_error_;
  for (const auto& r : plan_.resources) {
    ResourceStatus rs;
    rs.name = r.name;
    rs.socket = r.socket_name;
    auto it = registered_.find(r.name);
    rs.registered = it != registered_.end() && it->second;
    const auto states = device_states(r);
    rs.devices = states.size();
    rs.healthy = static_cast<size_t>(std::count_if(states.begin(), states.end(), [](const auto& d) { return d.healthy; }));
    s.resources.push_back(rs);
  }
  return s;
}

std::string DevicePluginManager::metrics_text() const {
  const Status s = status();
  std::string out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  };
  uint64_t ok = 0, failed = 0, regs = 0, allocs = 0, alloc_errors = 0, unhealthy = 0, recovered = 0;
  {
    std::lock_guard lock(mu_);
    ok = reloads_ok_;
    failed = reloads_failed_;
    regs = registrations_;
    allocs = allocations_;
    alloc_errors = allocation_errors_;
    unhealthy = unhealthy_transitions_;
    recovered = recoveries_;
  }
  family("kgpu_device_plugin_config_generation", "gauge", "Configs applied since the agent started (1 = the first).");
  out += fmt::format("kgpu_device_plugin_config_generation {}\n", s.config_generation);
  family("kgpu_device_plugin_config_last_reload_successful", "gauge",
         "Whether the newest config file was applied (1) or rejected, with the last good one in use (0).");
  out += fmt::format("kgpu_device_plugin_config_last_reload_successful {}\n", s.last_reload_error.empty() ? 1 : 0);
  family("kgpu_device_plugin_config_reloads_total", "counter", "Config file changes, by result.");
  out += fmt::format("kgpu_device_plugin_config_reloads_total{{result=\"success\"}} {}\n", ok);
  out += fmt::format("kgpu_device_plugin_config_reloads_total{{result=\"failure\"}} {}\n", failed);
  family("kgpu_device_plugin_registered", "gauge", "1 when the resource is registered with the kubelet.");
  for (const auto& r : s.resources) {
    out += fmt::format("kgpu_device_plugin_registered{{resource=\"{}\"}} {}\n", r.name, r.registered ? 1 : 0);
  }
  family("kgpu_device_plugin_devices", "gauge", "Devices advertised to the kubelet, by resource and health.");
  for (const auto& r : s.resources) {
    out += fmt::format("kgpu_device_plugin_devices{{resource=\"{}\",health=\"healthy\"}} {}\n", r.name, r.healthy);
    out += fmt::format("kgpu_device_plugin_devices{{resource=\"{}\",health=\"unhealthy\"}} {}\n", r.name,
                       r.devices - r.healthy);
  }
  family("kgpu_device_plugin_registrations_total", "counter", "Successful registrations with the kubelet.");
  out += fmt::format("kgpu_device_plugin_registrations_total {}\n", regs);
  family("kgpu_device_plugin_allocations_total", "counter", "Allocate calls answered, by result.");
  out += fmt::format("kgpu_device_plugin_allocations_total{{result=\"success\"}} {}\n", allocs);
  out += fmt::format("kgpu_device_plugin_allocations_total{{result=\"failure\"}} {}\n", alloc_errors);
  family("kgpu_device_plugin_unhealthy_transitions_total", "counter", "Devices marked Unhealthy.");
  out += fmt::format("kgpu_device_plugin_unhealthy_transitions_total {}\n", unhealthy);
  family("kgpu_device_plugin_recoveries_total", "counter", "Devices returned to Healthy by the recovery rule.");
  out += fmt::format("kgpu_device_plugin_recoveries_total {}\n", recovered);
  return out;
}

}  // namespace kgpu::agent
