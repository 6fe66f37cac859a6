#include "agent/dra_service.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "agent/plugin_manager_internal.h"
#include "common/log.h"
#include "apiclient/client.h"
#include "gpu/mig_manage.h"

namespace kgpu::agent {

DraService::DraService(gpu::NodeGpus& node, DraServiceOptions options)
    : node_(node),
      opt_(std::move(options)),
      clock_(opt_.plugins.clock != nullptr ? *opt_.plugins.clock : Clock::real()),
      health_(HealthOptions{opt_.plugins.disable_health_checks, opt_.plugins.enable_health_checks,
                            opt_.plugins.health_recovery},
              clock_),
      dynamic_(opt_.dynamic_mig) {}

DraService::~DraService() { stop(); }

namespace {

bool same_pool(const std::vector<dra::PublishedDevice>& a, const std::vector<dra::PublishedDevice>& b) {
  return std::ranges::equal(a, b, [](const dra::PublishedDevice& x, const dra::PublishedDevice& y) {
    return x.device == y.device && x.health.healthy == y.health.healthy && x.health.lost == y.health.lost &&
           x.health.needs_reset == y.health.needs_reset && x.health.reason == y.health.reason &&
           x.health.since == y.health.since;
  });
}

}  // namespace

void DraService::refresh() {
  // The claims' partitions as they were before the inventory read: an unprepare between the two
  // leaves its instance in the inventory, and it is still ours (partitionable()).
  const std::vector<dra::Partition> ours_before = driver_ ? driver_->partitions() : std::vector<dra::Partition>{};
  auto inv = node_.inventory();
  if (!inv) {
    log::warn("DRA: inventory not read: " + inv.error().message);
    return;
  }
  // The device plugin's health round: probe every GPU known (a lost one under its last known UUID),
  // then the recovery rule.
  std::vector<std::pair<unsigned, std::string>> gpus;
  bool relayout = false;
  {
    std::lock_guard lock(mu_);
    relayout = !inventory_.gpus.empty() && !detail::same_layout(*inv, inventory_);
    inventory_ = detail::merge_lost(*inv, inventory_);
    for (const auto& g : inventory_.gpus) {
      if (!g.uuid.empty()) gpus.emplace_back(g.index, g.uuid);
    }
  }
  health_round(health_, mu_, node_, gpus, inventory_);
  if (relayout) start_event_watcher();  // event registrations do not survive a GPU reset or MIG re-layout

  dra::BuildOptions bo{opt_.sysfs_root, {}};
  std::vector<std::string> partition_problems;
  if (dynamic_mig()) bo.partitionable = partitionable(*inv, ours_before, partition_problems);
  dra::DeviceSet set = dra::build_devices(*inv, bo);
  set.problems.insert(set.problems.end(), partition_problems.begin(), partition_problems.end());
  std::set<unsigned> lost;
  for (const auto& g : inv->gpus) {
    if (g.lost) lost.insert(g.index);
  }
  {
    std::lock_guard lock(mu_);
    if (set.problems != problems_) {
      for (const auto& p : set.problems) log::warn("DRA: device not published: " + p);
      problems_ = set.problems;
    }
    // A lost GPU is left out of the model: keep the devices it had.
    for (const auto& d : devices_) {
      if (!lost.contains(d.gpu_index) || dra::find_device(set.devices, d.name) != nullptr) continue;
      set.devices.push_back(d);
    }
    std::stable_sort(set.devices.begin(), set.devices.end(),
                     [](const dra::Device& a, const dra::Device& b) { return a.gpu_index < b.gpu_index; });
    devices_ = std::move(set.devices);
    counter_sets_ = std::move(set.counter_sets);
    lost_gpus_ = std::move(lost);
  }
  publish_pool();
}

bool DraService::dynamic_mig() const {
  std::lock_guard lock(mu_);
  return dynamic_;
}

Result<std::vector<gpu::mig::Offer>> DraService::offers_of(unsigned index, const std::string& uuid) {
  std::lock_guard lock(offers_mu_);
  if (const auto it = offers_.find(uuid); it != offers_.end() && !uuid.empty()) return it->second;
  auto offers = gpu::mig::offers(node_, index);
  if (offers && !offers->empty() && !uuid.empty()) offers_[uuid] = *offers;
  return offers;
}

std::map<unsigned, std::vector<gpu::mig::Offer>> DraService::partitionable(const gpu::Inventory& inv,
                                                                           std::vector<dra::Partition> ours,
                                                                           std::vector<std::string>& problems) {
  std::map<unsigned, std::vector<gpu::mig::Offer>> out;
  if (driver_) std::ranges::copy(driver_->partitions(), std::back_inserter(ours));  // and those prepared since
  for (const auto& g : inv.gpus) {
    if (g.lost || !g.mig_enabled.value_or(false)) continue;
    std::vector<std::string> foreign;
    for (const auto& m : g.mig_devices) {
      const bool claimed = m.profile_id && m.placement_start && std::ranges::any_of(ours, [&](const dra::Partition& p) {
                             return p.gpu_index == g.index && p.profile_id == *m.profile_id &&
                                    p.start == *m.placement_start;
                           });
      if (!claimed) foreign.push_back(fmt::format("{} at {}", m.profile, m.placement_start.value_or(0)));
    }
    if (!foreign.empty()) {
      problems.push_back(fmt::format("GPU {}: not partitionable, it has MIG instances no claim prepared here made ({}): "
                                     "published as they are; destroy them for dynamic MIG",
                                     g.index, fmt::join(foreign, ", ")));
      continue;
    }
    auto offers = offers_of(g.index, g.uuid);
    if (!offers || offers->empty()) {
      problems.push_back(fmt::format("GPU {}: no MIG profiles read{}", g.index,
                                     offers ? std::string() : ": " + offers.error().message));
      continue;
    }
    out.emplace(g.index, std::move(*offers));
  }
  return out;
}

Result<dra::Device> DraService::create_partition(const dra::Device& p) {
  if (p.shape == nullptr || !p.placement_start) return fail(ErrorCode::kInternal, "{}: not a partition", p.name);
  auto offers = offers_of(p.gpu_index, p.parent_uuid);
  if (!offers) return std::unexpected(offers.error());
  const auto offer = std::ranges::find_if(*offers, [&](const gpu::mig::Offer& o) { return o.shape == p.shape; });
  if (offer == offers->end()) {
    return fail(ErrorCode::kNotSupported, "GPU {} does not offer profile {} (any more)", p.gpu_index, p.profile);
  }
  auto made = gpu::mig::create_instance(node_, p.gpu_index, *offer, *p.placement_start);
  if (!made) return std::unexpected(made.error());
  auto inv = node_.inventory();
  if (!inv) return std::unexpected(inv.error().wrap("reading the new MIG device"));
  const dra::DeviceSet now = dra::build_devices(*inv, dra::BuildOptions{opt_.sysfs_root, {}});
  if (const dra::Device* d = dra::find_device(now.devices, p.name)) {
    log::info("DRA: MIG partition created", {log::kv("device", p.name), log::kv("uuid", d->uuid)});
    return *d;
  }
  (void)gpu::mig::destroy_instance(node_, p.gpu_index, *p.shape, *p.placement_start);
  return fail(ErrorCode::kInternal, "GPU {}: the {} instance at memory slice {} was created but NVML does not list it",
              p.gpu_index, p.profile, *p.placement_start);
}

Result<void> DraService::destroy_partition(const dra::Partition& p) {
  const gpu::mig::Shape* shape = gpu::mig::shape_by_profile_id(p.profile_id);
  if (shape == nullptr) return fail(ErrorCode::kInvalidArgument, "GPU {}: unknown MIG profile id {}", p.gpu_index, p.profile_id);
  if (auto ok = gpu::mig::destroy_instance(node_, p.gpu_index, *shape, p.start); !ok) return ok;
  log::info("DRA: MIG partition destroyed",
            {log::kv("gpu", p.gpu_index), log::kv("profile", shape->key), log::kv("start", p.start)});
  return {};
}

dra::DeviceHealth DraService::health_locked(const dra::Device& d) const {
  const HealthState s = health_.device(d.uuid, d.parent_uuid);
  const bool lost_now = lost_gpus_.contains(d.gpu_index);
  dra::DeviceHealth h;
  if (s.healthy && !lost_now) return h;
  h.healthy = false;
  h.lost = lost_now || s.lost;
  h.needs_reset = s.needs_reset;
  h.reason = s.healthy ? "GPU lost" : s.reason;
  if (!s.healthy) h.since = s.since;  // else timeAdded is left to the API server
  return h;
}

void DraService::publish_pool() {
  std::vector<dra::PublishedDevice> pool;
  std::vector<dra::CounterSet> sets;
  {
    std::lock_guard lock(mu_);
    for (const auto& d : devices_) {
      dra::PublishedDevice p;
      p.device = dra::slice_device_json(d);
      p.health = health_locked(d);
      pool.push_back(std::move(p));
    }
    if (same_pool(pool, published_) && counter_sets_ == published_sets_) return;
    published_ = pool;
    published_sets_ = counter_sets_;
    sets = counter_sets_;
  }
  if (opt_.publish) opt_.publish(std::move(pool), std::move(sets));
}

void DraService::on_event(const gpu::Event& e) {
  {
    std::lock_guard lock(mu_);
    if (!health_.on_event(e, inventory_)) return;
    dirty_ = true;
  }
  cv_.notify_all();  // the service's thread publishes at once
}

void DraService::start_event_watcher() {
  if (events_) events_->stop();
  events_.reset();
  if (!health_.xid_health()) return;  // fixed at construction: read without the lock
  auto w = gpu::EventWatcher::start(node_, [this](const gpu::Event& e) { on_event(e); });
  if (w) {
    events_ = std::move(*w);
    for (const auto& e : events_->registration_errors()) log::warn("DRA health: " + e);
    log::info("DRA health: watching XID events");
  } else {
    log::warn(fmt::format("DRA health: no XID events ({}); devices are checked by polling only", w.error().message));
  }
}

Result<void> DraService::start() {
  if (opt_.plugins.cdi_root.empty()) return fail(ErrorCode::kInvalidArgument, "DRA: --cdi-root must not be empty");
  auto inv = node_.inventory();
  if (!inv) return std::unexpected(inv.error().wrap("DRA"));
  auto config = sharing::load_config(opt_.plugins.config_file, opt_.plugins.overrides);
  if (!config) return std::unexpected(config.error().wrap("DRA"));
  // Events are followed before the pool is first published, so none after it is missed.
  {
    std::lock_guard lock(mu_);
    inventory_ = *inv;
  }
  if (health_.xid_health()) {
    start_event_watcher();
  } else {
    log::info("DRA health: XID health checks disabled by DP_DISABLE_HEALTHCHECKS",
              {log::kv("DP_DISABLE_HEALTHCHECKS", opt_.plugins.disable_health_checks)});
  }

  dra::DriverOptions o;
  o.driver_name = opt_.driver_name;
  o.node_name = opt_.node_name;
  o.cdi_root = opt_.plugins.cdi_root;
  o.state_dir = opt_.dirs.plugins_dir + "/" + opt_.driver_name;
  o.cdi_config = *config;
  o.host = node_host_facts(*config, *inv, opt_.plugins.proc_root, opt_.plugins.pci_devices_dir);
  if (auto client = opt_.client) {
    o.get_claim = [client](const std::string& ns, const std::string& name) -> Result<nlohmann::json> {
      auto c = client->get(kube::resources::kResourceClaims, ns, name);
      if (!c) return std::unexpected(c.error().to_error());
      return std::move(*c);
    };
  }
  o.devices = [this] { return devices(); };
  o.healthy = [this](const dra::Device& d) {
    std::lock_guard lock(mu_);
    return health_locked(d).healthy;
  };
  if (MpsControl* mps = opt_.mps) {
    const std::string root = config->mps_root;
    o.start_mps = [mps, root](const dra::MpsClaim& m) -> Result<void> {
      // One control daemon per claim, limited to the claim's GPUs: the device plugin's MPS control
      // with the claim as the "resource".
      sharing::PlannedResource r;
      r.name = "claim-" + m.claim_uid;
      r.sharing = sharing::SharingKind::kMps;
      for (size_t i = 0; i < m.uuids.size(); ++i) {
        sharing::PlannedDevice d;
        d.id = d.uuid = d.gpu_uuid = m.uuids[i];
        d.gpu_index = m.gpu_indices[i];
        r.devices.push_back(d);
        sharing::MpsLimit l;
        l.gpu_index = m.gpu_indices[i];
        l.uuid = m.uuids[i];
        l.pinned_memory_mib = m.settings.pinned_memory_bytes.value_or(0) >> 20;
        l.active_thread_percentage = m.settings.active_thread_percentage.value_or(100);
        r.mps.push_back(l);
      }
      return mps->apply(root, r);
    };
    o.stop_mps = [mps, root](const std::string& uid) { mps->remove(root, "claim-" + uid); };
  }
  if (opt_.dynamic_mig) {
    o.create_partition = [this](const dra::Device& p) { return create_partition(p); };
    o.destroy_partition = [this](const dra::Partition& p) { return destroy_partition(p); };
  }
  driver_ = std::make_unique<dra::Driver>(std::move(o));
  if (auto ok = driver_->start(); !ok) return ok;
  refresh();  // after the checkpoint: it says which MIG instances are claims' partitions
  plugin_ = std::make_unique<dra::Plugin>(*driver_, opt_.dirs);
  if (auto ok = plugin_->start(); !ok) return std::unexpected(ok.error().wrap("DRA"));
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { loop(); });
  return {};
}

void DraService::loop() {
  auto next_inventory = clock_.steady_now() + opt_.inventory_interval;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    clock_.wait_for(cv_, lock, opt_.poll, [this] { return stopping_ || dirty_; });
    if (stopping_) break;
    const bool dirty = std::exchange(dirty_, false);
    lock.unlock();
    if (dirty) publish_pool();
    if (auto ok = plugin_->check_sockets(); !ok) log::error("DRA: " + ok.error().message);
    bool turned_off = false;
    if (opt_.counters_dropped && dynamic_mig() && opt_.counters_dropped()) {
      {
        std::lock_guard l(mu_);
        dynamic_ = false;
      }
      turned_off = true;
      log::error("DRA: the API server does not keep ResourceSlice counter sets (partitionable devices: feature gate "
                 "DRAPartitionableDevices, Kubernetes 1.34+): dynamic MIG is off; MIG devices are published as they "
                 "exist");
    }
    if (turned_off || clock_.steady_now() >= next_inventory) {
      refresh();
      next_inventory = clock_.steady_now() + opt_.inventory_interval;
    }
    lock.lock();
  }
}

void DraService::stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (events_) events_->stop();
  events_.reset();
  if (plugin_) plugin_->stop();
}

std::vector<dra::Device> DraService::devices() const {
  std::lock_guard lock(mu_);
  return devices_;
}

}  // namespace kgpu::agent
