#include "agent/dra_service.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "agent/plugin_manager_internal.h"
#include "common/log.h"
#include "apiclient/client.h"

namespace kgpu::agent {

DraService::DraService(gpu::NodeGpus& node, DraServiceOptions options)
    : node_(node),
      opt_(std::move(options)),
      clock_(opt_.plugins.clock != nullptr ? *opt_.plugins.clock : Clock::real()),
      health_(HealthOptions{opt_.plugins.disable_health_checks, opt_.plugins.enable_health_checks,
                            opt_.plugins.health_recovery},
              clock_) {}

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

  dra::DeviceSet set = dra::build_devices(*inv, dra::BuildOptions{opt_.sysfs_root});
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
    lost_gpus_ = std::move(lost);
  }
  publish_pool();
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
  {
    std::lock_guard lock(mu_);
    for (const auto& d : devices_) {
      dra::PublishedDevice p;
      p.device = dra::slice_device_json(d);
      p.health = health_locked(d);
      pool.push_back(std::move(p));
    }
    if (same_pool(pool, published_)) return;
    published_ = pool;
  }
  if (opt_.publish) opt_.publish(std::move(pool));
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
  refresh();

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
  driver_ = std::make_unique<dra::Driver>(std::move(o));
  if (auto ok = driver_->start(); !ok) return ok;
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
    if (clock_.steady_now() >= next_inventory) {
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
