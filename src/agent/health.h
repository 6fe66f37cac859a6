// The node's device health book, shared by both GPU APIs: the device plugin (DevicePluginManager
// turns it into Healthy/Unhealthy in ListAndWatch) and the DRA driver (DraService turns it into
// ResourceSlice device taints). Rules (docs/device-plugin.md, "Health"; docs/dra.md, "Health
// taints"):
//
// - an XID event marks the device it names Unhealthy (the MIG device of the event's GPU/compute
//   instance, else the GPU; every GPU when NVML did not say which), unless the XID is ignored
//   (default_ignored_xids(), DP_DISABLE_HEALTHCHECKS, minus DP_ENABLE_HEALTHCHECKS); an XID of
//   reset_required_xids() also records that only a reset clears it;
// - a GPU lost (event or probe), a probe that fails, a GPU answering with another UUID, a row remap
//   pending: the GPU is Unhealthy; a failed event wait marks every GPU;
// - the recovery rule: a device returns to Healthy after `recovery` without a new fault while its
//   GPU answers the probe, and for a reset-class fault only once the probe saw the GPU gone and
//   back; `recovery` 0 never returns it (NVIDIA's behaviour);
// - a MIG device is Unhealthy when it or its parent GPU is (device());
// - a GPU held by remediation (hold()) is Unhealthy whatever the other rules say, until unhold(),
//   which returns it to Healthy (remediation validated it).
//
// Devices are keyed by physical UUID (GPU-... or MIG-...).
//
// Thread safety: none. The owner serialises every call (both owners call it under their lock).
// The clock (not owned) must outlive the book.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "gpu/node.h"
#include "gpu/types.h"

namespace kgpu::agent {

// XIDs NVIDIA's plugin ignores by default (application errors, not hardware faults).
const std::set<uint64_t>& default_ignored_xids();
// XIDs whose remedy is a GPU reset (NVIDIA's XID catalogue): the recovery rule does not return a
// device they marked to Healthy until the GPU was lost and came back.
const std::set<uint64_t>& reset_required_xids();

struct HealthOptions {
  // DP_DISABLE_HEALTHCHECKS: "all" or "xids" disables XID health; otherwise extra XIDs to ignore.
  std::string disable_health_checks;
  // DP_ENABLE_HEALTHCHECKS: XIDs to watch even though NVIDIA ignores them by default.
  std::string enable_health_checks;
  // The recovery rule's quiet period; 0 = never Healthy again.
  std::chrono::milliseconds recovery{std::chrono::minutes(10)};
};

// One device's entry. A device without an entry is Healthy.
struct HealthState {
  bool healthy = true;
  bool needs_reset = false;                     // marked by an XID of reset_required_xids() or a pending row remap
  bool was_lost = false;                        // the probe saw the GPU gone since it was marked
  bool lost = false;                            // the GPU is gone now (lost event, or the last probe found it lost)
  bool held = false;                            // withheld by remediation (hold())
  std::string reason;                           // the last fault: "XID 79", "GPU lost (fell off the bus)"
  Clock::SteadyTime last_bad{};                 // the last fault (the recovery rule's clock)
  std::chrono::system_clock::time_point since;  // when it last went from Healthy to Unhealthy
};

class HealthBook {
 public:
  // Reads the XID lists (words that are not numbers are logged and skipped).
  HealthBook(const HealthOptions& options, Clock& clock);

  // False when DP_DISABLE_HEALTHCHECKS turned XID health off (no event watcher needed).
  bool xid_health() const { return xid_health_; }
  const std::set<uint64_t>& ignored_xids() const { return ignored_; }

  // Records a fault of `uuid` now. Logs the transition to Unhealthy.
  void mark_bad(const std::string& uuid, const std::string& reason, bool needs_reset = false);

  // An NVML event, its GPU looked up in `inventory` (the devices the owner serves). False when it
  // changed nothing: an ignored XID, an ECC event (those that matter arrive as XIDs).
  bool on_event(const gpu::Event& e, const gpu::Inventory& inventory);

  // One GPU's health probe (NodeGpus::probe of GPU `index`, known as `uuid`): marks a fault, or
  // clears `lost`. True when the GPU answered as itself with no row remap pending: the GPU counts
  // as answering for recover().
  bool record_probe(const std::string& uuid, unsigned index, const gpu::NodeGpus::Probe& probe);

  // The recovery rule over every Unhealthy device, now; `answering` holds the GPUs (UUIDs) whose
  // probe of this round returned true, `inventory` maps MIG devices to their GPU. Returns the
  // devices returned to Healthy (each logged).
  std::vector<std::string> recover(const gpu::Inventory& inventory, const std::set<std::string>& answering);

  // The state of a device, taking its parent GPU's into account (`parent_uuid` empty for a GPU): a
  // MIG device is Unhealthy when it or its GPU is. When both are, the worse fault speaks (lost, then
  // reset-required, then the device's own), and `since` is the earlier.
  HealthState device(const std::string& uuid, const std::string& parent_uuid = "") const;
  bool healthy(const std::string& uuid) const;

  // Remediation withholds / returns a GPU (agent/remediation_service.h). Logged.
  void hold(const std::string& uuid, const std::string& reason);
  void unhold(const std::string& uuid);

  // Every device with an entry: uuid -> healthy.
  std::map<std::string, bool> healthy_map() const;

  uint64_t unhealthy_transitions() const { return unhealthy_transitions_; }
  uint64_t recoveries() const { return recoveries_; }
  std::chrono::milliseconds recovery() const { return recovery_; }

 private:
  Clock& clock_;
  std::chrono::milliseconds recovery_;
  std::set<uint64_t> ignored_;
  bool xid_health_ = true;
  std::map<std::string, HealthState> states_;
  uint64_t unhealthy_transitions_ = 0, recoveries_ = 0;
};

// One health round of an owner that guards `book` and `inventory` with `mu`: each GPU of `gpus`
// (index, UUID) probed through `node` without holding `mu` (a probe may block in the driver), each
// answer recorded and then the recovery rule applied, under `mu`.
void health_round(HealthBook& book, std::mutex& mu, gpu::NodeGpus& node,
                  const std::vector<std::pair<unsigned, std::string>>& gpus, const gpu::Inventory& inventory);

}  // namespace kgpu::agent
