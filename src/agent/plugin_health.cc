// DevicePluginManager: device health. XID and GPU-lost events (event thread), the periodic
// probe with the recovery rule and GPU layout changes (control thread). The rules are the health
// book's (agent/health.h, shared with the DRA driver); docs/device-plugin.md.
#include "agent/plugin_manager.h"

#include <fmt/format.h>

#include "agent/plugin_manager_internal.h"
#include "common/log.h"

namespace kgpu::agent {

namespace detail {

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

}  // namespace detail

void DevicePluginManager::start_event_watcher() {
  if (events_) events_->stop();
  events_.reset();
  if (!health_.xid_health()) return;
  auto w = gpu::EventWatcher::start(node_, [this](const gpu::Event& e) { on_event(e); });
  if (w) {
    events_ = std::move(*w);
    for (const auto& e : events_->registration_errors()) log::warn("health: " + e);
    log::info("health: watching XID events");
  } else {
    log::warn(fmt::format("health: no XID events ({}); devices are checked by polling only", w.error().message));
  }
}

void DevicePluginManager::on_event(const gpu::Event& e) {
  if (opt_.on_fault) opt_.on_fault(e);
  {
    std::lock_guard lock(mu_);
    if (!health_.on_event(e, inventory_)) return;
  }
  {
    std::lock_guard lock(stop_mu_);
    dirty_ = true;
  }
  stop_cv_.notify_all();  // the control thread pushes the new lists at once
}

void DevicePluginManager::withhold(const std::string& uuid, const std::string& reason) {
  {
    std::lock_guard lock(mu_);
    health_.hold(uuid, reason);
  }
  {
    std::lock_guard lock(stop_mu_);
    dirty_ = true;
  }
  stop_cv_.notify_all();
}

void DevicePluginManager::release(const std::string& uuid) {
  {
    std::lock_guard lock(mu_);
    health_.unhold(uuid);
  }
  {
    std::lock_guard lock(stop_mu_);
    dirty_ = true;
  }
  stop_cv_.notify_all();
}

void DevicePluginManager::check_health() {
  auto fresh = node_.inventory();
  std::vector<std::pair<unsigned, std::string>> gpus;
  {
    std::lock_guard lock(mu_);
    for (const auto& g : inventory_.gpus) gpus.emplace_back(g.index, g.uuid);
  }
  health_round(health_, mu_, node_, gpus, inventory_);
  // Host facts change under us: the UVM device nodes appear on first use, a driver upgrade renames
  // the libraries. Rewrite the CDI spec when they do.
  {
    sharing::Config config;
    gpu::Inventory inv;
    {
      std::lock_guard lock(mu_);
      config = config_;
      inv = inventory_;
    }
    sharing::HostFacts facts = host_facts(config, inv);
    bool differ = false, failing = false;
    {
      std::lock_guard lock(mu_);
      differ = !(facts == host_) || facts_nodes_differ(facts);
      if (differ) host_ = std::move(facts);
      failing = !cdi_error_.empty();
    }
    // A spec refused (a device node missing while the driver loads) is retried every round.
    if (differ || failing) write_cdi_spec();
  }
  if (!fresh) return;
  bool changed = false;
  {
    std::lock_guard lock(mu_);
    changed = !detail::same_layout(*fresh, inventory_);
  }
  if (!changed) return;
  log::info("the GPU layout changed (MIG reconfiguration or GPUs replaced): planning again");
  sharing::Config config;
  gpu::Inventory merged;
  {
    std::lock_guard lock(mu_);
    config = config_;
    merged = detail::merge_lost(std::move(*fresh), inventory_);
  }
  auto plan = sharing::make_plan(merged, config);
  // A MIG re-layout that migStrategy single cannot use: the old devices are gone, so nothing is
  // advertised and the labels say <model>-MIG-INVALID (GPU Feature Discovery's rule).
  const auto invalid_layout = plan ? std::nullopt : sharing::single_layout_problem(merged, config);
  if (invalid_layout) plan = sharing::Plan{};
  if (!plan) {
    std::lock_guard lock(mu_);
    last_reload_error_ = plan.error().message;
    log::error(
        fmt::format("the new GPU layout cannot be advertised: {}; keeping the previous plan", plan.error().message));
    return;
  }
  set_invalid_layout(invalid_layout);
  apply_plan(std::move(*plan), std::move(config), std::move(merged));
  start_event_watcher();  // event registrations do not survive a GPU reset or MIG re-layout
}

}  // namespace kgpu::agent
