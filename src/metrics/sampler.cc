#include "metrics/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "common/log.h"

namespace kgpu::metrics {

namespace {

// "GPU-abc::3" -> "GPU-abc" (time-slicing / MPS replica ids).
std::string strip_replica(const std::string& id, bool* replica) {
  const auto pos = id.find("::");
  *replica = pos != std::string::npos;
  return *replica ? id.substr(0, pos) : id;
}

// A device-plugin device name: "nvidia<N>", "nvidia<N>/gi<M>" (a MIG instance), either with a
// "/vgpu<K>" sharing suffix (GKE's names).
struct DeviceName {
  unsigned gpu = 0;
  std::optional<unsigned> gi;
  bool shared = false;
};

std::optional<unsigned> parse_small(std::string_view s) {
  if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  unsigned v = 0;
  for (char c : s) v = v * 10 + static_cast<unsigned>(c - '0');
  return v;
}

std::optional<DeviceName> parse_device_name(std::string_view id) {
  if (!id.starts_with("nvidia")) return std::nullopt;
  id.remove_prefix(6);
  DeviceName d;
  if (const auto v = id.find("/vgpu"); v != std::string_view::npos) {
    if (!parse_small(id.substr(v + 5))) return std::nullopt;
    d.shared = true;
    id = id.substr(0, v);
  }
  const auto gi = id.find("/gi");
  const auto gpu = parse_small(id.substr(0, gi));
  if (!gpu) return std::nullopt;
  d.gpu = *gpu;
  if (gi != std::string_view::npos) {
    d.gi = parse_small(id.substr(gi + 3));
    if (!d.gi) return std::nullopt;
  }
  return d;
}

constexpr size_t kMaxWindowEvents = 100000;  // per GPU: bounds memory whatever the window and rate

}  // namespace

std::string sanitize_label_name(std::string_view name) {
  std::string out(name);
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
    if (!ok) c = '_';
  }
  // A Prometheus label name does not start with a digit (a Kubernetes label name may).
  if (!out.empty() && out[0] >= '0' && out[0] <= '9') out.insert(out.begin(), '_');
  return out;
}

Sampler::Sampler(gpu::NodeGpus& node, SamplerOptions options)
    : node_(node),
      opt_(std::move(options)),
      clock_(opt_.clock != nullptr ? *opt_.clock : Clock::real()),
      pod_resources_(opt_.pod_resources_socket),
      resolver_(opt_.proc_root, opt_.container_log_dir, opt_.pod_log_dir, clock_) {
  for (const auto& pattern : opt_.pod_label_allowlist) {
    try {
      allowlist_.emplace_back(pattern);
    } catch (const std::regex_error& e) {
      log::warn(fmt::format("pod label allowlist: '{}' is not a valid regex ({}); skipped", pattern, e.what()));
    }
  }
}

Sampler::~Sampler() { stop(); }

void Sampler::refresh_inventory() {
  samples_since_inventory_ = 0;
  auto inv = node_.inventory();
  if (!inv) {
    ++nvml_errors_["inventory"];
    return;
  }
  driver_version_ = inv->driver_version;
  gpus_.clear();
  migs_.clear();
  gpu_by_uuid_.clear();
  mig_by_uuid_.clear();
  for (const auto& g : inv->gpus) {
    if (g.uuid.empty()) continue;  // lost before we ever knew it: nothing to label it with
    DeviceIdentity id{g.index, g.uuid, g.pci.bus_id, g.name, std::nullopt, std::nullopt};
    gpus_[g.index] = id;
    gpu_by_uuid_[g.uuid] = g.index;
    for (const auto& m : g.mig_devices) {
      DeviceIdentity mid = id;
      mid.gi_profile = m.profile;
      mid.gi_id = m.gpu_instance_id;
      migs_[{g.index, m.gpu_instance_id}] = mid;
      mig_by_uuid_[m.uuid] = {g.index, m.gpu_instance_id};
    }
  }
  if (!opt_.dra_driver.empty()) dra_devices_ = gpu::dra_names(*inv);
}

bool Sampler::is_gpu_resource(const std::string& r) const {
  if (!opt_.dra_driver.empty() && r == opt_.dra_driver) return true;  // claim_devices() entries
  if (r == "nvidia.com/gpu" || r.starts_with("nvidia.com/mig-") || r.starts_with("nvidia.com/gpu.")) return true;
  return std::find(opt_.extra_resources.begin(), opt_.extra_resources.end(), r) != opt_.extra_resources.end();
}

void Sampler::on_event(const gpu::Event& e) {
  if (e.kind != gpu::EventKind::kXid || !e.gpu_index) return;
  std::lock_guard lock(mu_);
  const std::string uuid = e.uuid.empty() ? fmt::format("index-{}", *e.gpu_index) : e.uuid;
  last_xid_[uuid] = e.xid;
  ++xid_counts_[{uuid, e.xid}];
  auto& window = xid_window_[uuid];
  window.emplace_back(clock_.steady_now(), e.xid);
  if (window.size() > kMaxWindowEvents) window.pop_front();
}

struct Sampler::Holders {
  std::map<unsigned, std::set<PodRef>> gpu;  // exclusive owners and sharers, by GPU index
  std::map<unsigned, bool> gpu_replicated;   // a replica (time-slicing / MPS) id names the GPU
  std::map<std::pair<unsigned, unsigned>, std::set<PodRef>> mig;  // by (GPU, GPU instance)
};

void Sampler::sample_now() {
  const auto started = clock_.steady_now();
  if (gpus_.empty() || ++samples_since_inventory_ >= 60) refresh_inventory();
  std::vector<gpu::CallError> node_errors;
  auto ts = node_.telemetry(&node_errors);
  for (const auto& e : node_errors) ++nvml_errors_[e.call];
  if (opt_.enrich) opt_.enrich(ts);
  check_inventory(ts);
  std::vector<kubelet::ContainerDevice> devices;
  Frame f = begin_frame(&devices);
  const Holders holders = find_holders(devices, f);
  const auto now = clock_.steady_now();
  add_devices(std::move(ts), holders, now, f);
  add_shared_usage(holders, now, f);
  add_windows_and_pods(now, f);
  publish(std::move(f), node_errors, started);
}

void Sampler::check_inventory(const std::vector<gpu::Telemetry>& ts) {
  // A device we do not know under that index / GPU instance: the GPUs or the MIG layout changed.
  for (const auto& t : ts) {
    if (t.uuid.empty()) continue;
    const auto g = gpus_.find(t.gpu_index);
    const bool known = t.gpu_instance_id ? mig_by_uuid_.contains(t.uuid) : (g != gpus_.end() && g->second.uuid == t.uuid);
    if (!known) {
      refresh_inventory();
      return;
    }
  }
}

Frame Sampler::begin_frame(std::vector<kubelet::ContainerDevice>* devices) {
  Frame f;
  f.hostname = opt_.hostname;
  f.driver_version = driver_version_;
  std::lock_guard lock(mu_);
  const bool fresh = pod_resources_up_ || clock_.steady_now() - down_since_ < opt_.pod_resources_grace;
  if (fresh) {
    *devices = devices_;
    for (auto& d : claim_devices(claims_, opt_.dra_driver, opt_.dra_pool, dra_devices_))
      devices->push_back(std::move(d));
  }
  for (const auto& [key, n] : xid_counts_) {
    if (auto it = gpu_by_uuid_.find(key.first); it != gpu_by_uuid_.end()) f.xid_counts[{it->second, key.second}] = n;
  }
  f.stats.pod_resources_up = pod_resources_up_;
  f.stats.pod_resources_errors = pod_resources_errors_;
  return f;
}

Sampler::Holders Sampler::find_holders(const std::vector<kubelet::ContainerDevice>& devices, Frame& f) {
  // The kubelet names a device we do not know: look again (at most every 30 s).
  const bool device_names = opt_.gpu_id_type == "device-name";
  // A device name the kubelet uses instead of a UUID: the GPU index or MIG instance it names.
  auto by_name = [&](const std::string& id) -> std::optional<DeviceName> {
    auto n = parse_device_name(id);
    if (!n || (!n->gi && !device_names)) return std::nullopt;  // nvidia<N>/gi<M> is always a name
    return n;
  };
  for (const auto& d : devices) {
    bool replica = false;
    const std::string base = strip_replica(d.device_id, &replica);
    if (is_gpu_resource(d.resource) && !by_name(d.device_id) && !gpu_by_uuid_.contains(base) &&
        !mig_by_uuid_.contains(base) && clock_.steady_now() - last_unknown_refresh_ > std::chrono::seconds(30)) {
      last_unknown_refresh_ = clock_.steady_now();
      refresh_inventory();
      break;
    }
  }
  Holders h;
  for (const auto& d : devices) {
    if (!is_gpu_resource(d.resource)) continue;
    bool replica = false;
    const std::string base = strip_replica(d.device_id, &replica);
    PodRef pod{d.ns, d.pod, d.container};
    if (const auto n = by_name(d.device_id)) {
      if (n->gi) {
        if (auto m = migs_.find({n->gpu, *n->gi}); m != migs_.end()) {
          h.mig[m->first].insert(pod);
          f.allocations.push_back({pod, m->second, d.resource, d.device_id});
        }
      } else if (auto g = gpus_.find(n->gpu); g != gpus_.end()) {
        h.gpu[n->gpu].insert(pod);
        h.gpu_replicated[n->gpu] = h.gpu_replicated[n->gpu] || n->shared;
        f.allocations.push_back({pod, g->second, d.resource, d.device_id});
      }
    } else if (auto it = gpu_by_uuid_.find(base); it != gpu_by_uuid_.end()) {
      h.gpu[it->second].insert(pod);
      h.gpu_replicated[it->second] = h.gpu_replicated[it->second] || replica;
      f.allocations.push_back({pod, gpus_[it->second], d.resource, d.device_id});
    } else if (auto mt = mig_by_uuid_.find(base); mt != mig_by_uuid_.end()) {
      h.mig[mt->second].insert(pod);
      f.allocations.push_back({pod, migs_[mt->second], d.resource, d.device_id});
    }
  }
  return h;
}

void Sampler::add_devices(std::vector<gpu::Telemetry> ts, const Holders& holders, Clock::SteadyTime now, Frame& f) {
  auto exclusive = [](const std::set<PodRef>& s) -> std::optional<PodRef> {
    if (s.size() == 1) return *s.begin();
    return std::nullopt;
  };
  std::map<unsigned, size_t> parent_at;  // GPU index -> its DeviceSample in f.devices
  for (auto& t : ts) {
    for (const auto& e : t.errors) ++nvml_errors_[e.call];
    DeviceSample ds;
    if (t.gpu_instance_id) {
      auto it = migs_.find({t.gpu_index, *t.gpu_instance_id});
      if (it == migs_.end()) continue;
      ds.id = it->second;
      if (auto h = holders.mig.find({t.gpu_index, *t.gpu_instance_id}); h != holders.mig.end()) {
        ds.owner = exclusive(h->second);
      }
      // dcgm-exporter's shape: the instance's series carry every field, the GPU-wide readings
      // (clocks, temperatures, power, energy, PCIe, NVLink, XID, ECC) from the parent; NVML gives
      // framebuffer and GPM ratios per instance, DCGM profiling fields per GPU instance (the
      // GPU's own are on no instance series); utilization rates are not per instance in NVML
      // (docs/metrics.md, "MIG").
      if (auto p = parent_at.find(t.gpu_index); p != parent_at.end()) {
        DeviceSample& parent = f.devices[p->second];
        parent.mig_parent = true;
        gpu::Telemetry merged = parent.telemetry;
        merged.gpu_instance_id = t.gpu_instance_id;
        merged.uuid = t.uuid;
        merged.fb_total_mib = t.fb_total_mib;
        merged.fb_free_mib = t.fb_free_mib;
        merged.fb_used_mib = t.fb_used_mib;
        merged.fb_reserved_mib = t.fb_reserved_mib;
        merged.gpu_util_pct.reset();
        merged.mem_copy_util_pct.reset();
        merged.gr_engine_active = t.gr_engine_active;
        merged.tensor_active = t.tensor_active;
        merged.dram_active = t.dram_active;
        merged.pcie_tx_bytes_per_s = t.pcie_tx_bytes_per_s;
        merged.pcie_rx_bytes_per_s = t.pcie_rx_bytes_per_s;
        merged.prof_fields = std::move(t.prof_fields);
        merged.errors = std::move(t.errors);
        t = std::move(merged);
        ds.history = parent.history;
      }
    } else {
      auto it = gpus_.find(t.gpu_index);
      if (it == gpus_.end()) continue;
      ds.id = it->second;
      f.gpu_identity[t.gpu_index] = it->second;
      f.gpu_up[t.gpu_index] = gpu::answers(t);
      const auto r = holders.gpu_replicated.find(t.gpu_index);
      const bool replicated = r != holders.gpu_replicated.end() && r->second;
      if (auto h = holders.gpu.find(t.gpu_index); h != holders.gpu.end() && !replicated) {
        ds.owner = exclusive(h->second);
      }
      {
        std::lock_guard lock(mu_);
        if (auto x = last_xid_.find(it->second.uuid); x != last_xid_.end()) ds.history.last_xid = x->second;
      }
      if (t.nvlink_tx_kib && t.nvlink_rx_kib) {
        const uint64_t total = *t.nvlink_tx_kib + *t.nvlink_rx_kib;
        if (auto p = nvlink_prev_.find(t.gpu_index); p != nvlink_prev_.end() && total >= p->second.kib) {
          const double dt = std::chrono::duration<double>(now - p->second.at).count();
          if (dt > 0) ds.history.nvlink_bandwidth = static_cast<long long>((total - p->second.kib) / dt / 1000.0);
        }
        nvlink_prev_[t.gpu_index] = {total, now};
      }
      if (t.clock_event_reasons && *t.clock_event_reasons != 0) {
        auto& window = clock_events_[it->second.uuid];
        window.emplace_back(now, *t.clock_event_reasons);
        if (window.size() > kMaxWindowEvents) window.pop_front();
      }
      parent_at[t.gpu_index] = f.devices.size();
    }
    ds.telemetry = std::move(t);
    f.devices.push_back(std::move(ds));
  }
  // Each GPU's instances right after it, by GPU-instance id (dcgm-exporter's order).
  std::stable_sort(f.devices.begin(), f.devices.end(), [](const DeviceSample& a, const DeviceSample& b) {
    return std::tuple(a.id.gpu, a.id.gi_id.has_value(), a.id.gi_id.value_or(0)) <
           std::tuple(b.id.gpu, b.id.gi_id.has_value(), b.id.gi_id.value_or(0));
  });
  // A GPU we know that NVML no longer reports (count failed, or fewer GPUs): down, not gone.
  for (const auto& [index, id] : gpus_) {
    if (!f.gpu_up.contains(index)) {
      f.gpu_identity[index] = id;
      f.gpu_up[index] = false;
    }
  }
}

void Sampler::add_shared_usage(const Holders& holders, Clock::SteadyTime now, Frame& f) {
  for (const auto& [gpu, sharers] : holders.gpu) {
    const auto r = holders.gpu_replicated.find(gpu);
    const bool replicated = r != holders.gpu_replicated.end() && r->second;
    if (sharers.size() < 2 && !replicated) continue;
    auto procs = node_.processes(gpu);
    if (!procs) {
      if (procs.error().code != ErrorCode::kNotSupported) ++nvml_errors_["nvmlDeviceGetComputeRunningProcesses_v3"];
      continue;
    }
    auto util = node_.process_utilization(gpu, process_util_seen_[gpu]);
    if (util) {
      std::map<unsigned, uint64_t> newest;  // pid -> timestamp of the sample kept
      for (const auto& u : *util) {
        auto [it, first] = newest.try_emplace(u.pid, u.timestamp_us);
        if (first || u.timestamp_us >= it->second) {
          it->second = u.timestamp_us;
          proc_util_[{gpu, u.pid}] = {u.sm_util, now};
        }
        process_util_seen_[gpu] = std::max(process_util_seen_[gpu], u.timestamp_us);
      }
    } else if (util.error().code != ErrorCode::kNotSupported) {
      ++nvml_errors_["nvmlDeviceGetProcessUtilization"];
    }
    std::map<PodRef, ContainerUsage> usage;
    for (const auto& p : *procs) {
      auto pod = resolver_.resolve(p.pid);
      if (!pod) continue;
      auto& u = usage[*pod];
      u.pod = *pod;
      u.device = gpus_[gpu];
      u.memory_mib += p.used_memory_bytes.value_or(0) >> 20;
      ++u.processes;
      if (util) {
        auto it = proc_util_.find({gpu, p.pid});
        // A process without a recent sample did no work in the sampling window.
        const auto window = std::max<std::chrono::steady_clock::duration>(3 * opt_.interval, std::chrono::seconds(3));
        const unsigned sm = (it != proc_util_.end() && now - it->second.at < window) ? it->second.sm : 0;
        u.sm_util_pct = u.sm_util_pct.value_or(0) + sm;
      }
    }
    for (auto& [pod, u] : usage) f.containers.push_back(std::move(u));
  }
  std::erase_if(proc_util_, [&](const auto& kv) { return now - kv.second.at > std::chrono::minutes(5); });
}

void Sampler::add_windows_and_pods(Clock::SteadyTime now, Frame& f) {
  f.xid_window_ms = opt_.xid_count_window.count();
  f.clock_events_window_ms = opt_.clock_events_count_window.count();
  f.mig_parent_series = opt_.mig_parent_series;
  f.style = opt_.style;
  auto count = [&](auto& windows, std::chrono::milliseconds width, auto& out, bool bits) {
    for (auto it = windows.begin(); it != windows.end();) {
      auto& events = it->second;
      while (!events.empty() && now - events.front().first > width) events.pop_front();
      if (events.empty()) {
        it = windows.erase(it);
        continue;
      }
      if (auto g = gpu_by_uuid_.find(it->first); g != gpu_by_uuid_.end()) {
        auto& counts = out[g->second];
        for (const auto& [at, v] : events) {
          if (!bits) {
            ++counts[v];
            continue;
          }
          for (uint64_t bit = 1; bit != 0 && bit <= v; bit <<= 1) {
            if ((v & bit) != 0) ++counts[bit];
          }
        }
      }
      ++it;
    }
  };
  count(clock_events_, opt_.clock_events_count_window, f.clock_event_window, true);
  {
    std::lock_guard lock(mu_);
    count(xid_window_, opt_.xid_count_window, f.xid_window, false);
  }

  if (!opt_.pod_uid && !opt_.pod_labels) return;
  std::set<std::pair<std::string, std::string>> wanted;
  for (const auto& d : f.devices) {
    if (d.owner) wanted.insert({d.owner->ns, d.owner->pod});
  }
  for (const auto& u : f.containers) wanted.insert({u.pod.ns, u.pod.pod});
  for (const auto& a : f.allocations) wanted.insert({a.pod.ns, a.pod.pod});
  if (wanted.empty()) return;
  std::map<std::pair<std::string, std::string>, PodInfo> api;
  if (opt_.pods) {
    for (auto& p : opt_.pods()) {
      auto key = std::pair{p.ns, p.name};
      if (wanted.contains(key)) api.emplace(std::move(key), std::move(p));
    }
  }
  for (const auto& key : wanted) {
    PodMeta meta;
    const auto it = api.find(key);
    if (opt_.pod_uid) {
      if (it != api.end()) {
        meta.uid = it->second.uid;
      } else if (auto uid = resolver_.pod_uid(key.first, key.second)) {
        meta.uid = *uid;
      }
    }
    if (opt_.pod_labels && it != api.end()) {
      for (const auto& [k, v] : it->second.labels) {
        const bool allowed =
            allowlist_.empty() ||
            std::any_of(allowlist_.begin(), allowlist_.end(), [&](const auto& re) { return std::regex_search(k, re); });
        if (!allowed) continue;
        // Two names that sanitize alike ("a.b", "a_b"): the first (in name order) is kept.
        std::string name = sanitize_label_name(k);
        if (std::none_of(meta.labels.begin(), meta.labels.end(), [&](const auto& l) { return l.first == name; })) {
          meta.labels.emplace_back(std::move(name), v);
        }
      }
    }
    if (!meta.uid.empty() || !meta.labels.empty()) f.pod_meta.emplace(key, std::move(meta));
  }
}

void Sampler::publish(Frame f, const std::vector<gpu::CallError>& node_errors, Clock::SteadyTime started) {
  ++samples_;
  const auto finished = clock_.steady_now();
  f.stats.samples = samples_;
  f.stats.last_sample_seconds = std::chrono::duration<double>(finished - started).count();
  f.stats.last_sample_unix = clock_.unix_now();
  f.stats.nvml_errors = nvml_errors_;
  auto page = std::make_shared<const std::string>(render(opt_.counters, f));
  std::vector<std::string> problems;
  for (const auto& e : node_errors) {
    problems.push_back(fmt::format("NVML cannot list the GPUs: {} returned {}", e.call,
                                   nvml::return_name(static_cast<nvml::Return>(e.code))));
  }
  for (const auto& [index, up] : f.gpu_up) {
    if (up) continue;
    const auto& id = f.gpu_identity[index];
    problems.push_back(fmt::format("GPU {} ({}) does not answer NVML", index, id.uuid.empty() ? "uuid unknown" : id.uuid));
  }
  std::lock_guard lock(mu_);
  page_ = std::move(page);
  last_sample_ = finished;
  problems_ = std::move(problems);
}

std::vector<std::string> Sampler::problems() const {
  std::lock_guard lock(mu_);
  return problems_;
}

void Sampler::poll_pod_resources_now() {
  if (opt_.pod_resources_socket.empty()) return;
  auto list = pod_resources_.list_all(opt_.pod_resources_timeout);
  if (list && opt_.translate) list->devices = opt_.translate(list->devices);
  std::lock_guard lock(mu_);
  if (list) {
    devices_ = std::move(list->devices);
    claims_ = std::move(list->claims);
    pod_resources_up_ = true;
  } else {
    if (pod_resources_up_) {
      log::warn(list.error().message, {log::kv("socket", opt_.pod_resources_socket)});
      down_since_ = clock_.steady_now();
    }
    pod_resources_up_ = false;
    ++pod_resources_errors_;
  }
}

std::shared_ptr<const std::string> Sampler::page() const {
  std::lock_guard lock(mu_);
  return page_;
}

bool Sampler::healthy() const {
  std::lock_guard lock(mu_);
  return page_ != nullptr &&
         clock_.steady_now() - last_sample_ < 3 * opt_.interval + std::chrono::seconds(1);
}

void Sampler::sample_loop() {
  std::unique_lock lock(stop_mu_);
  while (!stopping_) {
    if (clock_.wait_for(stop_cv_, lock, opt_.interval, [&] { return stopping_; })) break;
    lock.unlock();
    sample_now();
    lock.lock();
  }
}

void Sampler::poll_loop() {
  std::unique_lock lock(stop_mu_);
  while (!stopping_) {
    lock.unlock();
    poll_pod_resources_now();
    lock.lock();
    clock_.wait_for(stop_cv_, lock, opt_.pod_resources_interval, [&] { return stopping_; });
  }
}

void Sampler::start() {
  auto watcher = gpu::EventWatcher::start(node_, [this](const gpu::Event& e) { on_event(e); });
  if (watcher) {
    events_ = std::move(*watcher);
    for (const auto& e : events_->registration_errors()) log::warn(e);
  } else {
    log::warn("no XID events: " + watcher.error().message);
  }
  if (!opt_.pod_resources_socket.empty()) poll_pod_resources_now();
  sample_now();
  sample_thread_ = std::thread([this] { sample_loop(); });
  if (!opt_.pod_resources_socket.empty()) poll_thread_ = std::thread([this] { poll_loop(); });
}

void Sampler::stop() {
  {
    std::lock_guard lock(stop_mu_);
    stopping_ = true;
  }
  stop_cv_.notify_all();
  if (sample_thread_.joinable()) sample_thread_.join();
  if (poll_thread_.joinable()) poll_thread_.join();
  if (events_) events_->stop();
}

}  // namespace kgpu::metrics
