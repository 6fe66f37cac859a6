#include "agent/dra_service.h"

#include <algorithm>

#include "common/log.h"
#include "kube/client.h"

namespace kgpu::agent {

DraService::DraService(gpu::NodeGpus& node, DraServiceOptions options) : node_(node), opt_(std::move(options)) {}

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
  dra::DeviceSet set = dra::build_devices(*inv, dra::BuildOptions{opt_.sysfs_root});
  std::set<std::string> sick;
  std::set<unsigned> lost;
  for (const auto& g : inv->gpus) {
    if (!g.lost && !g.error) continue;
    // A lost GPU may have no UUID left to read: its devices are found by index below.
    if (!g.uuid.empty()) sick.insert(g.uuid);
    for (const auto& m : g.mig_devices) sick.insert(m.uuid);
    if (g.lost) lost.insert(g.index);
  }
  std::vector<dra::PublishedDevice> pool;
  {
    std::lock_guard lock(mu_);
    if (set.problems != problems_) {
      for (const auto& p : set.problems) log::warn("DRA: device not published: " + p);
      problems_ = set.problems;
    }
    // A lost GPU is left out of the model: keep the devices it had, unhealthy.
    for (const auto& d : devices_) {
      if (!lost.contains(d.gpu_index) || dra::find_device(set.devices, d.name) != nullptr) continue;
      set.devices.push_back(d);
      sick.insert(d.uuid);
    }
    std::stable_sort(set.devices.begin(), set.devices.end(),
                     [](const dra::Device& a, const dra::Device& b) { return a.gpu_index < b.gpu_index; });
    devices_ = std::move(set.devices);
    unhealthy_ = std::move(sick);
    lost_gpus_ = std::move(lost);
    const auto now = std::chrono::system_clock::now();
    std::map<std::string, std::chrono::system_clock::time_point> since;
    for (const auto& d : devices_) {
      dra::PublishedDevice p;
      p.device = dra::slice_device_json(d);
      if (sick_locked(d)) {
        auto it = sick_since_.find(d.uuid);
        p.health.healthy = false;
        p.health.lost = lost_gpus_.contains(d.gpu_index);
        p.health.reason = p.health.lost ? "GPU lost" : "GPU not readable";
        p.health.since = since[d.uuid] = it != sick_since_.end() ? it->second : now;
      }
      pool.push_back(std::move(p));
    }
    sick_since_ = std::move(since);
    if (same_pool(pool, published_)) return;
    published_ = pool;
  }
  if (opt_.publish) opt_.publish(std::move(pool));
}

Result<void> DraService::start() {
  if (opt_.plugins.cdi_root.empty()) return fail(ErrorCode::kInvalidArgument, "DRA: --cdi-root must not be empty");
  auto inv = node_.inventory();
  if (!inv) return std::unexpected(inv.error().wrap("DRA"));
  auto config = sharing::load_config(opt_.plugins.config_file, opt_.plugins.overrides);
  if (!config) return std::unexpected(config.error().wrap("DRA"));
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
    return !sick_locked(d);
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
  auto next_inventory = std::chrono::steady_clock::now() + opt_.inventory_interval;
  std::unique_lock lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, opt_.poll, [this] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    if (auto ok = plugin_->check_sockets(); !ok) log::error("DRA: " + ok.error().message);
    if (std::chrono::steady_clock::now() >= next_inventory) {
      refresh();
      next_inventory = std::chrono::steady_clock::now() + opt_.inventory_interval;
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
  if (plugin_) plugin_->stop();
}

bool DraService::sick_locked(const dra::Device& d) const {
  return lost_gpus_.contains(d.gpu_index) || unhealthy_.contains(d.uuid) ||
         (!d.parent_uuid.empty() && unhealthy_.contains(d.parent_uuid));
}

std::vector<dra::Device> DraService::devices() const {
  std::lock_guard lock(mu_);
  return devices_;
}

}  // namespace kgpu::agent
