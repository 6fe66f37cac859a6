// GPU remediation: from a fault's recommendation (health/fault_actions.h) to a GPU in service
// again, one GPU at a time, every step recorded so that a restarted agent resumes where it was
// (docs/remediation.md).
//
// Phases of one GPU:
//   in-service      nothing to do
//   noted           an out-of-service recommendation with remediation off or in dry run: the node
//                   condition says so (and, in dry run, an Event says what would be done)
//   draining        reset-gpu: the GPU is withheld (not advertised), a slot of the cluster's
//                   remediation budget is held, its pods are evicted (PodDisruptionBudgets are the
//                   API server's: a refused eviction is tried again next step)
//   resetting       no pod and no process holds it: reset through NVML
//   validating      reset (or the node rebooted): the validation chain; success returns it
//   node-draining   reboot-node: the node is cordoned and its pods evicted; the reboot is the
//                   operator's (or a hook's); a new boot ID moves the GPU to validating
//   quarantined     `flap_faults` out-of-service faults within `flap_window`: withheld, not cycled
//   needs-operator  report (replace, inspect), or an escalation after a reset that failed twice
// A reset that fails, or a validation that fails, escalates to reboot-node once: never a loop.
// A later recommendation that is more severe moves a GPU on (draining -> node-draining); one that
// cancels (XID 154 with recovery action NONE) returns a GPU that is only noted or still draining.
//
// Thread safety: none; the owner serialises calls. The host and clock (not owned) outlive it.
#pragma once

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "health/fault_actions.h"

namespace kgpu::health {

enum class Phase { kInService, kNoted, kDraining, kResetting, kValidating, kNodeDraining, kQuarantined, kNeedsOperator };
const char* phase_name(Phase p);  // "in-service", "noted", ...
std::optional<Phase> parse_phase(std::string_view s);

enum class Mode { kOff, kDryRun, kOn };
std::optional<Mode> parse_mode(std::string_view s);  // "off", "dry-run", "on"
const char* mode_name(Mode m);

struct Policy {
  Mode mode = Mode::kOff;
  int flap_faults = 3;                         // out-of-service faults within flap_window that quarantine
  std::chrono::seconds flap_window{3600};
  bool evict = true;                           // false: wait for the GPU's pods to leave
  std::chrono::seconds drain_warning{600};     // a Warning Event naming the pods that still hold it, this often
};

struct PodRef {
  std::string ns, name, uid;
  bool operator==(const PodRef&) const = default;
};

enum class EvictOutcome { kEvicted, kBlocked, kGone };
struct Eviction {
  EvictOutcome outcome = EvictOutcome::kEvicted;
  std::string message;  // kBlocked: the API's answer (the PodDisruptionBudget's message)
};

struct GpuRecord {
  std::string uuid;
  unsigned index = 0;
  Phase phase = Phase::kInService;
  Action action = Action::kNone;
  std::string reason;            // what set the action: "XID 48: reset-gpu"
  std::string message;           // the last step: "evicting 2 pods: ..."
  double since = 0;              // unix seconds: entered this phase
  std::vector<double> faults;    // unix seconds of the out-of-service faults within the flap window
  bool budget = false;           // holds a slot of the cluster budget
  int resets = 0;                // resets tried in this episode
  std::string boot_id;           // node-draining: the boot the fault came in
  bool cordoned = false;         // node-draining: this remediation cordoned the node
  double warned = 0;             // unix seconds of the last drain warning

  bool operator==(const GpuRecord&) const = default;
  nlohmann::json to_json() const;
  // Errors name the field.
  static Result<GpuRecord> from_json(const nlohmann::json& j);
};

// What remediation acts through: production wires the agent's API client, NVML and health book
// (agent/remediation_host.cc); tests give a fake.
class RemediationHost {
 public:
  virtual ~RemediationHost() = default;
  // Stop / start advertising the GPU (Unhealthy to the kubelet, a DRA taint).
  virtual void withhold(const GpuRecord& r) = 0;
  virtual void release(const GpuRecord& r) = 0;
  virtual Result<std::vector<PodRef>> gpu_pods(const GpuRecord& r) = 0;
  // The pods a node drain evicts (not DaemonSet pods, not mirror pods, not finished ones).
  virtual Result<std::vector<PodRef>> node_pods() = 0;
  virtual Result<Eviction> evict(const PodRef& p) = 0;
  // A slot of the cluster's remediation budget (false: none free now; `holders` says who has them).
  virtual Result<bool> acquire_budget(const GpuRecord& r, std::string* holders) = 0;
  virtual Result<void> release_budget(const GpuRecord& r) = 0;
  virtual Result<unsigned> processes(const GpuRecord& r) = 0;
  virtual Result<void> reset(const GpuRecord& r) = 0;
  virtual Result<void> validate(const GpuRecord& r) = 0;
  virtual Result<void> cordon(bool on) = 0;
  virtual std::string boot_id() = 0;
  // The GPU is in service again: the classifier forgets its faults.
  virtual void cleared(const GpuRecord& r) = 0;
  virtual void event(const GpuRecord& r, bool warning, const std::string& reason, const std::string& message) = 0;
};

// One node condition (core/v1 NodeCondition without the times, which the publisher keeps).
struct Condition {
  std::string type, status, reason, message;
  bool operator==(const Condition&) const = default;
};
// The condition types, one per action class that takes something out of service.
inline constexpr const char* kConditionResetRequired = "GpuResetRequired";
inline constexpr const char* kConditionRebootRequired = "GpuRebootRequired";
inline constexpr const char* kConditionNeedsAttention = "GpuNeedsAttention";

class Remediator {
 public:
  Remediator(Policy policy, RemediationHost& host, Clock& clock) : policy_(policy), host_(host), clock_(clock) {}

  const Policy& policy() const { return policy_; }

  // Records read back at start (the node annotation): GPUs out of service are withheld again and
  // go on from their phase.
  void restore(std::map<std::string, GpuRecord> records);

  // The GPU's recommendation changed (or a fault came): `v` from the classifier.
  void on_verdict(const std::string& uuid, unsigned index, const Verdict& v);

  // Advances every GPU as far as it can now. True when a record changed (publish them).
  bool step();

  // The operator returns a quarantined or needs-operator GPU: it is validated, then released.
  Result<void> release_by_operator(const std::string& uuid);

  const std::map<std::string, GpuRecord>& records() const { return records_; }
  std::vector<Condition> conditions() const;

 private:
  void enter(GpuRecord& r, Phase p, const std::string& message);
  void escalate(GpuRecord& r, const std::string& why);
  bool step_draining(GpuRecord& r);
  bool step_resetting(GpuRecord& r);
  bool step_validating(GpuRecord& r);
  bool step_node_draining(GpuRecord& r);
  void finish(GpuRecord& r);
  bool evict_all(GpuRecord& r, const std::vector<PodRef>& pods, const char* what);

  Policy policy_;
  RemediationHost& host_;
  Clock& clock_;
  std::map<std::string, GpuRecord> records_;
};

}  // namespace kgpu::health
