#include "agent/health.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <sstream>

#include "common/log.h"
#include "common/strings.h"

namespace kgpu::agent {

const std::set<uint64_t>& reset_required_xids() {
  static const std::set<uint64_t> kReset{48, 62, 64, 74, 79, 92, 95, 119, 120, 140};
  return kReset;
}

const std::set<uint64_t>& default_ignored_xids() {
  static const std::set<uint64_t> kIgnored{13, 31, 43, 45, 68, 109};
  return kIgnored;
}

HealthBook::HealthBook(const HealthOptions& options, Clock& clock)
    : clock_(clock), recovery_(options.recovery), ignored_(default_ignored_xids()) {
  // NVIDIA's reading: case-insensitive; "all" or "xids" anywhere disables XID health; otherwise a
  // comma-separated list of more XIDs to ignore. DP_ENABLE_HEALTHCHECKS lists XIDs to watch even
  // though they are ignored by default.
  std::string dh = trim(options.disable_health_checks);
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
        log::warn(fmt::format("{}: '{}' is not an XID number; ignored", var, item));
      }
    }
    return out;
  };
  if (dh.find("all") != std::string::npos || dh.find("xids") != std::string::npos) {
    xid_health_ = false;
  } else {
    for (auto x : xids(dh, "DP_DISABLE_HEALTHCHECKS")) ignored_.insert(x);
  }
  for (auto x : xids(options.enable_health_checks, "DP_ENABLE_HEALTHCHECKS")) ignored_.erase(x);
}

void HealthBook::mark_bad(const std::string& uuid, const std::string& reason, bool needs_reset) {
  auto& h = states_[uuid];
  if (needs_reset) h.needs_reset = true;
  if (h.healthy) {
    ++unhealthy_transitions_;
    h.since = clock_.system_now();
    log::warn("device marked Unhealthy: " + reason, {log::kv("device", uuid)});
  }
  h.healthy = false;
  h.reason = reason;
  h.last_bad = clock_.steady_now();
}

bool HealthBook::on_event(const gpu::Event& e, const gpu::Inventory& inventory) {
  const gpu::GpuInfo* gpu = nullptr;
  for (const auto& g : inventory.gpus) {
    if ((!e.uuid.empty() && g.uuid == e.uuid) || (e.uuid.empty() && e.gpu_index && g.index == *e.gpu_index)) gpu = &g;
  }
  switch (e.kind) {
    case gpu::EventKind::kXid: {
      if (ignored_.contains(e.xid)) return false;
      const std::string reason = fmt::format("XID {}", e.xid);
      const bool reset = reset_required_xids().contains(e.xid);
      if (gpu == nullptr) {
        for (const auto& g : inventory.gpus) mark_bad(g.uuid, reason + " (GPU unknown)");
        return true;
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
      return true;
    }
    case gpu::EventKind::kGpuLost:
      if (gpu != nullptr) {
        mark_bad(gpu->uuid, "GPU lost");
        states_[gpu->uuid].lost = true;
      } else {
        for (const auto& g : inventory.gpus) mark_bad(g.uuid, e.message);
      }
      return true;
    case gpu::EventKind::kError:
      // NVIDIA's rule: an event wait that fails for another reason than a timeout makes every
      // device Unhealthy (the health signal itself is gone).
      for (const auto& g : inventory.gpus) mark_bad(g.uuid, e.message);
      return true;
    case gpu::EventKind::kSingleBitEcc:
    case gpu::EventKind::kDoubleBitEcc:
      return false;  // ECC faults arrive as XIDs (48, 63, 64, 94, 95) when they matter
  }
  return false;
}

bool HealthBook::record_probe(const std::string& uuid, unsigned index, const gpu::NodeGpus::Probe& p) {
  if (p.error) {
    mark_bad(uuid, p.lost ? "GPU lost (fell off the bus)" : *p.error);
    auto& h = states_[uuid];
    h.was_lost = true;
    h.lost = p.lost;
    return false;
  }
  if (auto it = states_.find(uuid); it != states_.end()) it->second.lost = false;
  if (p.uuid != uuid) {
    mark_bad(uuid, fmt::format("GPU {} now answers as {}", index, p.uuid));
    return false;
  }
  if (p.remap_pending.value_or(false)) {
    mark_bad(uuid, "row remapping pending: the GPU needs a reset");
    return false;
  }
  return true;
}

std::vector<std::string> HealthBook::recover(const gpu::Inventory& inventory, const std::set<std::string>& answering) {
  std::vector<std::string> out;
  const auto now = clock_.steady_now();
  for (auto& [uuid, h] : states_) {
    if (h.healthy || h.held || recovery_.count() == 0 || now - h.last_bad < recovery_) continue;
    // An XID whose remedy is a GPU reset keeps the device out until the GPU went away and came
    // back (a reset or re-enumeration), as seen by the probe.
    if (h.needs_reset && !h.was_lost) continue;
    // A MIG device recovers when its parent GPU answers.
    std::string gpu_uuid = uuid;
    for (const auto& g : inventory.gpus) {
      for (const auto& m : g.mig_devices) {
        if (m.uuid == uuid) gpu_uuid = g.uuid;
      }
    }
    if (!answering.contains(gpu_uuid)) continue;
    h.healthy = true;
    h.needs_reset = h.was_lost = h.lost = false;
    ++recoveries_;
    out.push_back(uuid);
    log::info(fmt::format("device returned to Healthy: no fault for {} s ({} before)",
                          std::chrono::duration_cast<std::chrono::seconds>(recovery_).count(), h.reason),
              {log::kv("device", uuid)});
  }
  return out;
}

HealthState HealthBook::device(const std::string& uuid, const std::string& parent_uuid) const {
  auto state = [&](const std::string& id) -> const HealthState* {
    if (id.empty()) return nullptr;
    auto it = states_.find(id);
    return it == states_.end() || it->second.healthy ? nullptr : &it->second;
  };
  const HealthState* own = state(uuid);
  const HealthState* parent = state(parent_uuid);
  if (own == nullptr && parent == nullptr) return {};
  if (own == nullptr) return *parent;
  if (parent == nullptr) return *own;
  auto rank = [](const HealthState& h) { return h.lost ? 2 : h.needs_reset ? 1 : 0; };
  HealthState out = rank(*parent) > rank(*own) ? *parent : *own;
  out.since = std::min(own->since, parent->since);
  return out;
}

void HealthBook::hold(const std::string& uuid, const std::string& reason) {
  auto& h = states_[uuid];
  if (h.held) return;
  if (h.healthy) {
    h.since = clock_.system_now();
    ++unhealthy_transitions_;
  }
  h.healthy = false;
  h.held = true;
  h.reason = "withheld: " + reason;
  h.last_bad = clock_.steady_now();
  log::warn("device withheld: " + reason, {log::kv("device", uuid)});
}

void HealthBook::unhold(const std::string& uuid) {
  auto it = states_.find(uuid);
  if (it == states_.end() || !it->second.held) return;
  it->second = HealthState{};
  ++recoveries_;
  log::info("device returned to service", {log::kv("device", uuid)});
}

bool HealthBook::healthy(const std::string& uuid) const {
  auto it = states_.find(uuid);
  return it == states_.end() || it->second.healthy;
}

std::map<std::string, bool> HealthBook::healthy_map() const {
  std::map<std::string, bool> out;
  for (const auto& [uuid, h] : states_) out[uuid] = h.healthy;
  return out;
}

void health_round(HealthBook& book, std::mutex& mu, gpu::NodeGpus& node,
                  const std::vector<std::pair<unsigned, std::string>>& gpus, const gpu::Inventory& inventory) {
  std::set<std::string> answering;
  for (const auto& [index, uuid] : gpus) {
    const auto p = node.probe(index);
    std::lock_guard lock(mu);
    if (book.record_probe(uuid, index, p)) answering.insert(uuid);
  }
  std::lock_guard lock(mu);
  book.recover(inventory, answering);
}

}  // namespace kgpu::agent
