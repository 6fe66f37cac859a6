#include "agent/plugin_manager.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "agent/plugin_manager_internal.h"
#include "common/files.h"
#include "common/log.h"
#include "common/strings.h"
#include "metrics/exposition.h"

namespace kgpu::agent {

std::vector<kubelet::ContainerAllocation> detail::to_kubelet(const std::vector<sharing::ContainerEdits>& edits) {
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

DevicePluginManager::FileStamp DevicePluginManager::stamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return {static_cast<unsigned long>(st.st_ino),
          static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec,
          static_cast<long long>(st.st_size)};
}

DevicePluginManager::DevicePluginManager(gpu::NodeGpus& node, DevicePluginOptions options)
    : node_(node),
      opt_(std::move(options)),
      clock_(opt_.clock != nullptr ? *opt_.clock : Clock::real()),
      health_(HealthOptions{opt_.disable_health_checks, opt_.enable_health_checks, opt_.health_recovery}, clock_) {
  mps_ = opt_.mps;
  if (mps_ == nullptr) {
    own_mps_ = std::make_unique<RealMpsControl>();
    mps_ = own_mps_.get();
  }
  if (!opt_.config_dir.dir.empty() && !opt_.config_file.empty()) {
    log::warn(fmt::format("config file {} (--config-file, CONFIG_FILE) is not read: the config directory {} "
                          "(--config-dir, CONFIG_FILE_SRCDIR) wins",
                          opt_.config_file, opt_.config_dir.dir));
    opt_.config_file.clear();
  }
  config_path_ = opt_.config_file;
  selected_ = {opt_.config_file, opt_.config_file, opt_.config_file.empty() ? "none" : "config-file"};
}

DevicePluginManager::~DevicePluginManager() { stop(); }

bool fails_on_init_error(const DevicePluginOptions& options, const std::string& config_text) {
  if (options.overrides.fail_on_init_error) {
    const auto& v = *options.overrides.fail_on_init_error;
    return v != "false" && v != "0";
  }
  const std::string file = initial_config_file(options);
  if (file.empty()) return true;
  auto parsed = sharing::parse_config(config_text, file);
  return !parsed || parsed->fail_on_init_error;
}

std::string initial_config_file(const DevicePluginOptions& options) {
  if (options.config_dir.dir.empty()) return options.config_file;
  auto choice = choose_config(options.config_dir, options.node_name, std::nullopt, list_configs(options.config_dir.dir));
  return choice ? choice->path : "";
}

Result<ConfigChoice> DevicePluginManager::choose_config_now() const {
  std::optional<std::string> label;
  if (opt_.cluster != nullptr) {
    if (auto labels = opt_.cluster->node_labels()) {
      auto it = labels->find(opt_.config_dir.node_label);
      if (it != labels->end()) label = it->second;
    }
  }
  return choose_config(opt_.config_dir, opt_.node_name, label, list_configs(opt_.config_dir.dir));
}

bool DevicePluginManager::check_selection() {
  auto choice = choose_config_now();
  if (!choice) {
    if (choice.error().message != selection_error_) {
      selection_error_ = choice.error().message;
      std::lock_guard lock(mu_);
      log::error(fmt::format("config not switched: {}; keeping the last good config (generation {})",
                             selection_error_, generation_),
                 {log::kv("config", applied_.name)});
      ++reloads_failed_;
      last_reload_error_ = selection_error_;
    }
    return false;
  }
  if (*choice == selected_ && selection_error_.empty()) return true;
  if (!(*choice == selected_)) {
    log::info("config selected", {log::kv("config", choice->name), log::kv("selected_by", choice->selected_by),
                                  log::kv("was", selected_.name), log::kv("node", opt_.node_name)});
  }
  selected_ = std::move(*choice);
  config_path_ = selected_.path;
  selection_error_.clear();
  config_stamp_ = FileStamp{0, 0, -2};  // matches no file: the chosen one is read now
  return true;
}

Result<void> DevicePluginManager::start() {
  if (opt_.cluster != nullptr) {
    // Before any resource is registered: the kubelet may call Allocate at once.
    if (!opt_.pod_resources_socket.empty() && !pod_resources_) {
      pod_resources_ = std::make_unique<kubelet::PodResourcesClient>(opt_.pod_resources_socket);
    }
    load_table();
  }
  kubelet_stamp_ = stamp(opt_.plugin_dir + "/" + kubelet::kKubeletSocketName);
  Result<void> chosen;
  if (!opt_.config_dir.dir.empty()) {
    if (opt_.cluster == nullptr) {
      log::info(fmt::format("config directory {}: no API access, so the node label {} is not read: the default "
                            "config or a fallback is used",
                            opt_.config_dir.dir, opt_.config_dir.node_label));
    }
    auto choice = choose_config_now();
    if (choice) {
      selected_ = std::move(*choice);
      config_path_ = selected_.path;
      log::info("config selected", {log::kv("config", selected_.name), log::kv("selected_by", selected_.selected_by),
                                    log::kv("node", opt_.node_name)});
    } else {
      selection_error_ = choice.error().message;
      chosen = std::unexpected(choice.error());
    }
  }
  if (auto ok = chosen ? load_and_apply(true) : chosen; !ok) {
    // failOnInitError (flag, variable, else the file's, default true) decides whether a node that
    // cannot be planned stops the agent or keeps serving metrics while the config is retried.
    if (fails_on_init_error(opt_, config_text_attempt_)) return ok;
    log::error(fmt::format("device plugin not started: {}; failOnInitError is false: serving metrics and retrying "
                           "the config",
                           ok.error().message));
    std::lock_guard lock(mu_);
    last_reload_error_ = ok.error().message;
    if (chosen) last_rejected_text_ = config_text_attempt_;  // a text was tried (not only a choice)
  }
  {
    std::lock_guard lock(mu_);
    using sharing::ListStrategy;
    if (config_.has_list_strategy(ListStrategy::kCdiCri) || config_.has_list_strategy(ListStrategy::kCdiAnnotations)) {
      if (auto w = sharing::cdi_runtime_warning(host_.containerd_config)) log::warn(*w);
    }
  }
  if (health_.xid_health()) {
    start_event_watcher();
  } else {
    log::info("health: XID health checks disabled by DP_DISABLE_HEALTHCHECKS",
              {log::kv("DP_DISABLE_HEALTHCHECKS", opt_.disable_health_checks)});
  }
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = false;
  }
  // The schedule starts now, not when the thread first runs (with a fake clock, time may move
  // before it does).
  const auto now0 = clock_.steady_now();
  next_config_check_ = now0 + opt_.config_poll_interval;
  next_health_ = now0 + opt_.health_interval;
  next_register_ = now0 + std::chrono::seconds(1);
  {
    std::lock_guard lock(mu_);
    next_labels_ = now0 + config_.gfd_sleep_interval;
  }
  thread_ = std::thread([this] { control_loop(); });
  if (opt_.cluster != nullptr) {
    report_thread_ = std::thread([this] { report_loop(); });
    request_report();
  }
  return {};
}

void DevicePluginManager::stop() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (report_thread_.joinable()) report_thread_.join();
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
  ConfigChoice in_use = selected_;
  if (!config_path_.empty()) {
    // Stamp first: a change after this point is seen by the next check_config().
    if (initial) config_stamp_ = stamp(config_path_);
    struct stat st {};
    if (::stat(config_path_.c_str(), &st) != 0) {
      // An optional ConfigMap that is not there (yet): the defaults, until the file appears.
      if (initial || !config_text_.empty()) {
        log::info(fmt::format("config file {} does not exist: using the defaults; the file is watched", config_path_));
      }
      in_use.name.clear();
    } else if (!S_ISREG(st.st_mode)) {
      return fail(ErrorCode::kInvalidArgument, "config file {} is not a regular file (a directory? name the file in it)",
                  config_path_);
    } else {
      auto read = read_file_limited(config_path_, sharing::kMaxConfigBytes);
      if (!read) return std::unexpected(read.error().wrap("config file"));
      text = std::move(*read);
      config_text_attempt_ = text;
      auto parsed = sharing::parse_config(text, config_path_);
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
    merged = detail::merge_lost(std::move(*inv), inventory_);
  }
  auto plan = sharing::make_plan(merged, config);
  std::optional<std::string> invalid_layout;
  if (!plan && initial) {
    // GPU Feature Discovery's rule: an unusable single layout is labelled <model>-MIG-INVALID
    // (count 0) and nothing is advertised; the agent keeps running so that the labels say so. A
    // config reload that would do this is rejected instead (the last good config keeps serving).
    invalid_layout = sharing::single_layout_problem(merged, config);
    if (invalid_layout) plan = sharing::Plan{};
  }
  if (!plan) return std::unexpected(plan.error());
  if (!config.imex_channel_ids.empty()) {
    if (auto ok = check_imex(config, host_facts(config, merged)); !ok) return ok;
  }
  for (const auto& w : config.warnings) log::warn("config: " + w, {log::kv("config", config.source)});
  for (const auto& w : plan->warnings) log::warn("plan: " + w);
  config_text_ = text;
  {
    std::lock_guard lock(mu_);
    applied_ = std::move(in_use);
    if (!initial) {
      ++reloads_ok_;
      last_rejected_text_.reset();
    }
  }
  if (!initial) log::info("config applied", {log::kv("config", config.source)});
  set_invalid_layout(invalid_layout);
  apply_plan(std::move(*plan), std::move(config), std::move(merged));
  return {};
}

void DevicePluginManager::set_invalid_layout(const std::optional<std::string>& reason) {
  std::string was;
  {
    std::lock_guard lock(mu_);
    was = invalid_layout_;
    invalid_layout_ = reason.value_or("");
  }
  if (reason && *reason != was) {
    log::error(fmt::format("{}: nothing is advertised and nvidia.com/gpu.product is labelled <model>-MIG-INVALID (as GPU "
                           "Feature Discovery does); use migStrategy mixed or make the MIG layout uniform",
                           *reason));
  } else if (!reason && !was.empty()) {
    log::info("the MIG layout suits migStrategy single again");
  }
}

std::vector<kubelet::DeviceState> DevicePluginManager::device_states(const sharing::PlannedResource& r) const {
  std::vector<kubelet::DeviceState> out;
  for (const auto& d : r.devices) out.push_back({d.id, health_.device(d.uuid, d.gpu_uuid).healthy, d.numa_node});
  return out;
}

void DevicePluginManager::apply_plan(sharing::Plan plan, sharing::Config config, gpu::Inventory inventory) {
  sharing::HostFacts facts = host_facts(config, inventory);
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
      log::info("no longer advertised", {log::kv("resource", r.name)});
    }
    if (r.sharing == sharing::SharingKind::kMps) mps_->remove(config_.mps_root, r.name);
    std::lock_guard lock(mu_);
    registered_.erase(r.name);
  }
  for (const auto& r : plan_.resources) {
    const sharing::PlannedResource* before = old.find(r.name);
    auto it = servers_.find(r.name);
    if (r.sharing == sharing::SharingKind::kMps) {
      if (auto ok = mps_->apply(config_.mps_root, r); !ok) log::error("MPS: " + ok.error().message, {log::kv("resource", r.name)});
    } else if (before != nullptr && before->sharing == sharing::SharingKind::kMps) {
      mps_->remove(config_.mps_root, r.name);
    }
    if (it != servers_.end()) {
      // The kubelet takes any new device list through the open ListAndWatch stream; restarting the
      // server would make it mark the resource unhealthy until we register again.
      if (before != nullptr && !sharing::same_advertisement(*before, r)) {
        log::info(fmt::format("now {} devices (was {})", r.devices.size(), before->devices.size()),
                  {log::kv("resource", r.name)});
      }
      it->second->set_devices(states[r.name]);
      continue;
    }
    const std::string name = r.name;
    kubelet::PluginCallbacks cb;
    cb.allocate = [this, name](const std::vector<std::vector<std::string>>& requests) {
      if (opt_.cluster != nullptr) return allocate_assigned(name, requests);
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
        log::warn("Allocate refused: " + edits.error().message, {log::kv("resource", name)});
        return Result<std::vector<kubelet::ContainerAllocation>>(std::unexpected(edits.error()));
      }
      return Result<std::vector<kubelet::ContainerAllocation>>(detail::to_kubelet(*edits));
    };
    cb.preferred = [this, name](const std::vector<std::string>& available, const std::vector<std::string>& must,
                                int size) {
      std::lock_guard lock(mu_);
      const auto* res = plan_.find(name);
      if (res == nullptr) return std::vector<std::string>{};
      return sharing::preferred_allocation(*res, inventory_.topology, config_.shared_policy, available, must, size);
    };
    auto server = std::make_unique<kubelet::DevicePluginServer>(name, opt_.plugin_dir, r.socket_name, std::move(cb), clock_);
    server->set_devices(states[name]);
    if (auto ok = server->start(); !ok) {
      log::error(ok.error().message, {log::kv("resource", name)});
      serve_error_[name] = ok.error().message;
    } else {
      log::info(fmt::format("serving {} devices", r.devices.size()),
                {log::kv("resource", name), log::kv("socket", server->socket_path())});
      register_one(*server);
    }
    servers_[name] = std::move(server);
  }
  write_labels();
  if (opt_.cluster != nullptr) request_report();
}

bool DevicePluginManager::register_one(kubelet::DevicePluginServer& server) {
  if (!server.running() && !server.start()) return false;
  auto ok = server.register_with_kubelet(opt_.register_timeout);
  std::lock_guard lock(mu_);
  const bool was = registered_[server.resource()];
  registered_[server.resource()] = ok.has_value();
  if (ok) {
    ++registrations_;
    log::info("registered with the kubelet", {log::kv("resource", server.resource())});
  } else if (was || ok.error().code != ErrorCode::kUnavailable) {
    log::warn(ok.error().message, {log::kv("resource", server.resource())});
  }
  return ok.has_value();
}

void DevicePluginManager::control_loop() {
  while (true) {
    // Wake for the next socket poll, or earlier when the health round or the config check is
    // already due: a clock that jumped while the previous round ran (a FakeClock advanced in a
    // test, a suspended VM) must not make the loop sleep through work that is due.
    const auto deadline = std::min({clock_.steady_now() + opt_.poll_interval, next_health_, next_config_check_});
    bool wake_report = false;
    {
      std::unique_lock lock(stop_mu_);
      clock_.wait_until(stop_cv_, lock, deadline, [&] { return stopping_ || dirty_; });
      if (stopping_) return;
      // Health changed: the node report says so without waiting for its interval.
      wake_report = dirty_ && opt_.cluster != nullptr;
      if (wake_report) report_requested_ = true;
      dirty_ = false;
    }
    if (wake_report) stop_cv_.notify_all();
    const auto now = clock_.steady_now();
    check_sockets();
    if (now >= next_config_check_) {
      next_config_check_ = now + opt_.config_poll_interval;
      check_config();
    }
    if (now >= next_health_) {
      next_health_ = now + opt_.health_interval;
      check_health();
      std::lock_guard lock(mu_);
      ++health_checks_;
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
  if (kubelet_new && kubelet_stamp_.inode != 0) log::info(fmt::format("the kubelet restarted ({} was re-created): registering again", kubelet));
  kubelet_stamp_ = now_stamp;
  const bool retry_due = clock_.steady_now() >= next_register_;
  if (retry_due) next_register_ = clock_.steady_now() + std::chrono::seconds(1);
  for (auto& [name, server] : servers_) {
    bool again = kubelet_new;
    if (!server->running() || !server->socket_present()) {
      // Serving failed before (retried once a second, logged when the reason changes), or the
      // socket was deleted (a restarting kubelet does that).
      if (server->running()) log::info("socket was removed: serving again", {log::kv("resource", name), log::kv("socket", server->socket_path())});
      if (!server->running() && !retry_due) continue;
      if (auto ok = server->start(); !ok) {
        if (serve_error_[name] != ok.error().message) log::error(ok.error().message, {log::kv("resource", name)});
        serve_error_[name] = ok.error().message;
        continue;
      }
      if (!serve_error_[name].empty()) log::info("serving", {log::kv("resource", name), log::kv("socket", server->socket_path())});
      serve_error_[name].clear();
      again = true;
    }
    if (server->stream_lost(std::chrono::seconds(2))) {
      // The kubelet closed ListAndWatch and did not come back (without deleting our socket):
      // only a new registration makes it connect again.
      log::info("the kubelet closed its ListAndWatch stream: registering again", {log::kv("resource", name)});
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
  if (!opt_.config_dir.dir.empty()) {
    if (!check_selection()) return;
  } else if (config_path_.empty()) {
    return;
  }
  const FileStamp s = stamp(config_path_);
  // The stamp catches every change but one within the file system's timestamp granularity that
  // keeps the size; the periodic full read catches that one too.
  const auto now = clock_.steady_now();
  if (s == config_stamp_ && now < next_full_config_read_) return;
  next_full_config_read_ = now + std::chrono::seconds(10);
  config_stamp_ = s;
  std::string text;
  if (s.inode != 0) {
    // An unreadable or oversized file is keyed by its error, so it is rejected (and logged) once.
    auto read = read_file_limited(config_path_, sharing::kMaxConfigBytes);
    text = read ? std::move(*read) : "\x01" + read.error().message;
  }
  {
    std::lock_guard lock(mu_);
    if (text == config_text_ && generation_ > 0) {
      // Back to the config in use (e.g. a bad edit reverted, or another config with the same
      // text chosen): nothing to apply, nothing wrong.
      applied_ = selected_;
      last_reload_error_.clear();
      last_rejected_text_.reset();
      return;
    }
    if (last_rejected_text_ && *last_rejected_text_ == text) return;  // rejected already: not again
  }
  auto applied = load_and_apply(false);
  if (applied) return;
  std::lock_guard lock(mu_);
  log::error(fmt::format("config rejected: {}; keeping the last good config (generation {})", applied.error().message,
                         generation_));
  ++reloads_failed_;
  last_reload_error_ = applied.error().message;
  last_rejected_text_ = text;
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

DevicePluginManager::Status DevicePluginManager::status() const {
  std::lock_guard lock(mu_);
  Status s;
  s.config_generation = generation_;
  s.health_checks = health_checks_;
  s.last_reload_error = last_reload_error_;
  s.cdi_error = cdi_error_;
  s.invalid_layout = invalid_layout_;
  s.config_name = applied_.name;
  s.config_selected_by = applied_.selected_by;
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
  namespace ex = metrics::exposition;
  const Status s = status();
  uint64_t ok = 0, failed = 0, regs = 0, allocs = 0, alloc_errors = 0, unhealthy = 0, recovered = 0;
  {
    std::lock_guard lock(mu_);
    ok = reloads_ok_;
    failed = reloads_failed_;
    regs = registrations_;
    allocs = allocations_;
    alloc_errors = allocation_errors_;
    unhealthy = health_.unhealthy_transitions();
    recovered = health_.recoveries();
  }
  std::string out;
  ex::family(out, "kgpu_device_plugin_config_generation", "gauge", "Configs applied since the agent started (1 = the first).");
  ex::sample(out, "kgpu_device_plugin_config_generation", s.config_generation);
  ex::family(out, "kgpu_device_plugin_config_last_reload_successful", "gauge",
             "Whether the newest config file was applied (1) or rejected, with the last good one in use (0).");
  ex::sample(out, "kgpu_device_plugin_config_last_reload_successful", s.last_reload_error.empty() ? 1 : 0);
  ex::family(out, "kgpu_device_plugin_config_info", "gauge",
             "The config in use: its name (in the config directory, else the file; \"\" = the built-in defaults) and "
             "what chose it.");
  ex::sample(out, "kgpu_device_plugin_config_info", {{"name", s.config_name}, {"selected_by", s.config_selected_by}}, 1);
  ex::family(out, "kgpu_device_plugin_config_reloads_total", "counter",
             "Config changes (file edits, or another config chosen by the node label), by result.");
  ex::sample(out, "kgpu_device_plugin_config_reloads_total", {{"result", "success"}}, ok);
  ex::sample(out, "kgpu_device_plugin_config_reloads_total", {{"result", "failure"}}, failed);
  ex::family(out, "kgpu_device_plugin_cdi_spec_last_write_successful", "gauge",
             "Whether the CDI specs were written the last time (0 while a device has no device node or the write "
             "fails; the files in place stay).");
  ex::sample(out, "kgpu_device_plugin_cdi_spec_last_write_successful", s.cdi_error.empty() ? 1 : 0);
  ex::family(out, "kgpu_device_plugin_mig_layout_invalid", "gauge",
             "Whether migStrategy single meets a MIG layout it cannot use (then nothing is advertised and the labels say "
             "<model>-MIG-INVALID).");
  ex::sample(out, "kgpu_device_plugin_mig_layout_invalid", s.invalid_layout.empty() ? 0 : 1);
  ex::family(out, "kgpu_device_plugin_registered", "gauge", "1 when the resource is registered with the kubelet.");
  for (const auto& r : s.resources) {
    ex::sample(out, "kgpu_device_plugin_registered", {{"resource", r.name}}, r.registered ? 1 : 0);
  }
  ex::family(out, "kgpu_device_plugin_devices", "gauge", "Devices advertised to the kubelet, by resource and health.");
  for (const auto& r : s.resources) {
    ex::sample(out, "kgpu_device_plugin_devices", {{"resource", r.name}, {"health", "healthy"}}, r.healthy);
    ex::sample(out, "kgpu_device_plugin_devices", {{"resource", r.name}, {"health", "unhealthy"}}, r.devices - r.healthy);
  }
  ex::family(out, "kgpu_device_plugin_registrations_total", "counter", "Successful registrations with the kubelet.");
  ex::sample(out, "kgpu_device_plugin_registrations_total", regs);
  ex::family(out, "kgpu_device_plugin_allocations_total", "counter", "Allocate calls answered, by result.");
  ex::sample(out, "kgpu_device_plugin_allocations_total", {{"result", "success"}}, allocs);
  ex::sample(out, "kgpu_device_plugin_allocations_total", {{"result", "failure"}}, alloc_errors);
  ex::family(out, "kgpu_device_plugin_unhealthy_transitions_total", "counter", "Devices marked Unhealthy.");
  ex::sample(out, "kgpu_device_plugin_unhealthy_transitions_total", unhealthy);
  ex::family(out, "kgpu_device_plugin_recoveries_total", "counter", "Devices returned to Healthy by the recovery rule.");
  ex::sample(out, "kgpu_device_plugin_recoveries_total", recovered);
  return out;
}

}  // namespace kgpu::agent
