#include "health/remediation.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace kgpu::health {

namespace {

constexpr std::array<const char*, 8> kPhaseNames = {"in-service",    "noted",       "draining",   "resetting",
                                                    "validating",    "node-draining", "quarantined", "needs-operator"};
constexpr std::array<const char*, 3> kModeNames = {"off", "dry-run", "on"};
constexpr size_t kMaxFaults = 64;

std::string gpu_name(const GpuRecord& r) { return fmt::format("GPU {} ({})", r.index, r.uuid); }

std::string pod_list(const std::vector<PodRef>& pods) {
  std::string s;
  for (size_t i = 0; i < pods.size() && i < 8; ++i) s += (i ? ", " : "") + pods[i].ns + "/" + pods[i].name;
  if (pods.size() > 8) s += fmt::format(" and {} more", pods.size() - 8);
  return s;
}

}  // namespace

const char* phase_name(Phase p) { return kPhaseNames[static_cast<size_t>(p)]; }

std::optional<Phase> parse_phase(std::string_view s) {
  for (size_t i = 0; i < kPhaseNames.size(); ++i) {
    if (s == kPhaseNames[i]) return static_cast<Phase>(i);
  }
  return std::nullopt;
}

std::optional<Mode> parse_mode(std::string_view s) {
  for (size_t i = 0; i < kModeNames.size(); ++i) {
    if (s == kModeNames[i]) return static_cast<Mode>(i);
  }
  return std::nullopt;
}

const char* mode_name(Mode m) { return kModeNames[static_cast<size_t>(m)]; }

nlohmann::json GpuRecord::to_json() const {
  return {{"uuid", uuid},     {"index", index},       {"phase", phase_name(phase)}, {"action", action_name(action)},
          {"reason", reason}, {"message", message},   {"since", since},             {"faults", faults},
          {"budget", budget}, {"resets", resets},     {"bootID", boot_id},          {"cordoned", cordoned},
          {"warned", warned}};
}

Result<GpuRecord> GpuRecord::from_json(const nlohmann::json& j) {
  if (!j.is_object()) return fail(ErrorCode::kInvalidArgument, "expected an object");
  GpuRecord r;
  auto str = [&](const char* k, std::string& out) -> Result<void> {
    if (!j.contains(k)) return {};
    if (!j[k].is_string()) return fail(ErrorCode::kInvalidArgument, "{}: expected a string", k);
    out = j[k].get<std::string>();
    if (out.size() > 4096) return fail(ErrorCode::kInvalidArgument, "{}: longer than 4096 bytes", k);
    return {};
  };
  for (auto [k, out] : {std::pair{"uuid", &r.uuid}, {"reason", &r.reason}, {"message", &r.message}, {"bootID", &r.boot_id}}) {
    if (auto ok = str(k, *out); !ok) return std::unexpected(ok.error());
  }
  if (r.uuid.empty()) return fail(ErrorCode::kInvalidArgument, "uuid: missing");
  std::string phase = "in-service", action = "none";
  if (auto ok = str("phase", phase); !ok) return std::unexpected(ok.error());
  if (auto ok = str("action", action); !ok) return std::unexpected(ok.error());
  const auto p = parse_phase(phase);
  if (!p) return fail(ErrorCode::kInvalidArgument, "phase: unknown '{}'", phase);
  r.phase = *p;
  const auto a = parse_action(action);
  if (!a) return fail(ErrorCode::kInvalidArgument, "action: unknown '{}'", action);
  r.action = *a;
  try {
    if (j.contains("index")) r.index = j["index"].get<unsigned>();
    if (j.contains("since")) r.since = j["since"].get<double>();
    if (j.contains("warned")) r.warned = j["warned"].get<double>();
    if (j.contains("budget")) r.budget = j["budget"].get<bool>();
    if (j.contains("cordoned")) r.cordoned = j["cordoned"].get<bool>();
    if (j.contains("resets")) r.resets = j["resets"].get<int>();
    if (j.contains("faults")) {
      if (!j["faults"].is_array() || j["faults"].size() > kMaxFaults) {
        return fail(ErrorCode::kInvalidArgument, "faults: expected at most {} times", kMaxFaults);
      }
      r.faults = j["faults"].get<std::vector<double>>();
    }
  } catch (const nlohmann::json::exception& e) {
    return fail(ErrorCode::kInvalidArgument, "a field of the wrong type: {}", e.what());
  }
  return r;
}

void Remediator::enter(GpuRecord& r, Phase p, const std::string& message) {
  r.phase = p;
  r.since = clock_.unix_now();
  r.message = message;
}

void Remediator::restore(std::map<std::string, GpuRecord> records) {
  records_ = std::move(records);
  for (auto& [uuid, r] : records_) {
    if (r.phase != Phase::kInService && r.phase != Phase::kNoted) host_.withhold(r);
  }
}

void Remediator::on_verdict(const std::string& uuid, unsigned index, const Verdict& v) {
  auto& r = records_[uuid];
  r.uuid = uuid;
  r.index = index;
  const double now = clock_.unix_now();
  if (!out_of_service(v.recommendation)) {
    if (!v.cancelled()) return;
    // A cancel returns what has not begun: a noted GPU, or one still draining.
    if (r.phase == Phase::kNoted || r.phase == Phase::kDraining) {
      const bool withheld = r.phase == Phase::kDraining;
      if (r.budget) {
        if (host_.release_budget(r)) r.budget = false;
      }
      if (withheld) host_.release(r);
      host_.event(r, false, "RemediationCancelled", fmt::format("{}: {}; back in service", gpu_name(r), v.reason));
      r.action = Action::kNone;
      r.reason = v.reason;
      enter(r, Phase::kInService, "cancelled: " + v.reason);
      host_.cleared(r);
    }
    return;
  }
  const bool active = r.phase != Phase::kInService && r.phase != Phase::kNoted;
  if (active) {
    if (v.recommendation > r.action && r.phase != Phase::kQuarantined && r.phase != Phase::kNeedsOperator) {
      r.action = v.recommendation;
      r.reason = v.reason;
      if (r.action == Action::kRebootNode && policy_.mode == Mode::kOn) {
        enter(r, Phase::kNodeDraining, "escalated: " + v.reason);
      } else if (r.action == Action::kReport) {
        enter(r, Phase::kNeedsOperator, v.reason);
      }
      host_.event(r, true, "RemediationEscalated", fmt::format("{}: {}", gpu_name(r), v.reason));
    }
    return;
  }
  // A new episode (or a worse fault while noted).
  r.faults.push_back(now);
  std::erase_if(r.faults, [&](double t) { return now - t > policy_.flap_window.count(); });
  if (r.faults.size() > kMaxFaults) r.faults.erase(r.faults.begin(), r.faults.end() - kMaxFaults);
  r.action = std::max(r.phase == Phase::kNoted ? r.action : Action::kNone, v.recommendation);
  r.reason = v.reason;
  r.resets = 0;
  if (policy_.mode == Mode::kOn && static_cast<int>(r.faults.size()) >= policy_.flap_faults) {
    host_.withhold(r);
    enter(r, Phase::kQuarantined,
          fmt::format("{} faults within {}s: quarantined instead of cycled; the last: {}", r.faults.size(),
                      policy_.flap_window.count(), v.reason));
    host_.event(r, true, "GpuQuarantined", fmt::format("{}: {}", gpu_name(r), r.message));
    return;
  }
  if (policy_.mode != Mode::kOn) {
    const bool first = r.phase != Phase::kNoted;
    std::string would;
    if (r.action == Action::kResetGpu) {
      would = "withhold it, evict its pods, reset it and validate it";
    } else if (r.action == Action::kRebootNode) {
      would = "withhold it, cordon and drain the node, and wait for a reboot";
    } else {
      would = "withhold it until an operator returns it";
    }
    enter(r, Phase::kNoted,
          fmt::format("{}; remediation is {}: it would {}", v.reason, mode_name(policy_.mode), would));
    if (policy_.mode == Mode::kDryRun && (first || v.changed())) {
      host_.event(r, true, "RemediationDryRun", fmt::format("{}: {}", gpu_name(r), r.message));
    }
    return;
  }
  host_.withhold(r);
  switch (r.action) {
    case Action::kResetGpu:
      enter(r, Phase::kDraining, v.reason + "; withheld, draining");
      break;
    case Action::kRebootNode:
      enter(r, Phase::kNodeDraining, v.reason + "; withheld, draining the node for a reboot");
      r.boot_id = host_.boot_id();
      break;
    default:
      enter(r, Phase::kNeedsOperator, v.reason + "; withheld until an operator returns it");
      break;
  }
  host_.event(r, true, "GpuOutOfService", fmt::format("{}: {}", gpu_name(r), r.message));
}

bool Remediator::evict_all(GpuRecord& r, const std::vector<PodRef>& pods, const char* what) {
  std::vector<std::string> blocked;
  size_t evicted = 0;
  for (const auto& p : pods) {
    if (!policy_.evict) break;
    auto e = host_.evict(p);
    if (!e) {
      blocked.push_back(fmt::format("{}/{}: {}", p.ns, p.name, e.error().message));
    } else if (e->outcome == EvictOutcome::kBlocked) {
      blocked.push_back(fmt::format("{}/{}: {}", p.ns, p.name, e->message));
    } else if (e->outcome == EvictOutcome::kEvicted) {
      ++evicted;
    }
  }
  std::string msg = fmt::format("{} {} pod(s) still {}: {}", pods.size(), what, policy_.evict ? "leaving" : "to leave",
                                pod_list(pods));
  if (!blocked.empty()) {
    msg += "; eviction refused for ";
    for (size_t i = 0; i < blocked.size() && i < 4; ++i) msg += (i ? "; " : "") + blocked[i];
  }
  const double now = clock_.unix_now();
  if (!blocked.empty() && (r.warned == 0 || now - r.warned >= policy_.drain_warning.count())) {
    r.warned = now;
    host_.event(r, true, "EvictionBlocked", fmt::format("{}: {}", gpu_name(r), msg));
  }
  const bool changed = msg != r.message || evicted > 0;
  r.message = msg;
  return changed;
}

bool Remediator::step_draining(GpuRecord& r) {
  if (!r.budget) {
    std::string holders;
    auto got = host_.acquire_budget(r, &holders);
    if (!got || !*got) {
      const auto msg = got ? fmt::format("waiting for a slot of the cluster's remediation budget (held by {})", holders)
                           : fmt::format("waiting for the remediation budget: {}", got.error().message);
      const bool changed = msg != r.message;
      r.message = msg;
      return changed;
    }
    r.budget = true;
  }
  auto pods = host_.gpu_pods(r);
  if (!pods) {
    r.message = "cannot list the GPU's pods: " + pods.error().message;
    return true;
  }
  if (!pods->empty()) {
    evict_all(r, *pods, "GPU");
    return true;
  }
  enter(r, Phase::kResetting, "no pod holds the GPU: resetting");
  step_resetting(r);
  return true;
}

bool Remediator::step_resetting(GpuRecord& r) {
  auto procs = host_.processes(r);
  if (procs && *procs > 0) {
    const auto msg = fmt::format("{} process(es) outside Kubernetes hold the GPU: waiting before the reset", *procs);
    const bool changed = msg != r.message;
    r.message = msg;
    return changed;
  }
  ++r.resets;
  auto ok = host_.reset(r);
  if (!ok) {
    escalate(r, "the reset failed: " + ok.error().message);
    return true;
  }
  host_.event(r, false, "GpuReset", fmt::format("{} reset", gpu_name(r)));
  enter(r, Phase::kValidating, "reset: validating");
  step_validating(r);
  return true;
}

bool Remediator::step_validating(GpuRecord& r) {
  auto ok = host_.validate(r);
  if (!ok) {
    escalate(r, "validation failed: " + ok.error().message);
    return true;
  }
  finish(r);
  return true;
}

void Remediator::finish(GpuRecord& r) {
  host_.release(r);
  if (r.budget && host_.release_budget(r)) r.budget = false;
  host_.cleared(r);
  const auto prior = r.reason;
  r.action = Action::kNone;
  enter(r, Phase::kInService, "validated and back in service after: " + prior);
  host_.event(r, false, "GpuReturnedToService", fmt::format("{}: {}", gpu_name(r), r.message));
  // The node was cordoned for this GPU: uncordon once no other GPU needs the node drained.
  if (r.cordoned) {
    r.cordoned = false;
    const bool others = std::any_of(records_.begin(), records_.end(), [&](const auto& kv) {
      return kv.second.phase == Phase::kNodeDraining && kv.first != r.uuid;
    });
    if (!others) (void)host_.cordon(false);
  }
}

void Remediator::escalate(GpuRecord& r, const std::string& why) {
  // One escalation: a GPU that was already on its way to a reboot, or failed again after one,
  // needs a person.
  if (r.action >= Action::kRebootNode || r.resets > 1) {
    r.action = Action::kReport;
    enter(r, Phase::kNeedsOperator, why + "; needs an operator");
  } else {
    r.action = Action::kRebootNode;
    r.boot_id = host_.boot_id();
    enter(r, policy_.mode == Mode::kOn ? Phase::kNodeDraining : Phase::kNeedsOperator, why + "; escalated to reboot-node");
  }
  host_.event(r, true, "RemediationEscalated", fmt::format("{}: {}", gpu_name(r), r.message));
}

bool Remediator::step_node_draining(GpuRecord& r) {
  if (!r.boot_id.empty() && host_.boot_id() != r.boot_id) {
    enter(r, Phase::kValidating, "the node rebooted: validating");
    step_validating(r);
    return true;
  }
  bool changed = false;
  if (!r.cordoned) {
    auto ok = host_.cordon(true);
    if (!ok) {
      r.message = "cannot cordon the node: " + ok.error().message;
      return true;
    }
    r.cordoned = true;
    changed = true;
    host_.event(r, true, "NodeCordoned", fmt::format("{}: {}; the node waits for a reboot", gpu_name(r), r.reason));
  }
  auto pods = host_.node_pods();
  if (!pods) {
    r.message = "cannot list the node's pods: " + pods.error().message;
    return true;
  }
  if (!pods->empty()) return evict_all(r, *pods, "node") || changed;
  const auto msg = "cordoned and drained: waiting for the node to reboot (" + r.reason + ")";
  changed = changed || msg != r.message;
  r.message = msg;
  return changed;
}

bool Remediator::step() {
  bool changed = false;
  if (policy_.mode != Mode::kOn) return false;
  for (auto& [uuid, r] : records_) {
    switch (r.phase) {
      case Phase::kDraining:
        changed = step_draining(r) || changed;
        break;
      case Phase::kResetting:
        changed = step_resetting(r) || changed;
        break;
      case Phase::kValidating:
        changed = step_validating(r) || changed;
        break;
      case Phase::kNodeDraining:
        changed = step_node_draining(r) || changed;
        break;
      default:
        break;
    }
  }
  return changed;
}

Result<void> Remediator::release_by_operator(const std::string& uuid) {
  const auto it = records_.find(uuid);
  if (it == records_.end() || it->second.phase == Phase::kInService) {
    return fail(ErrorCode::kNotFound, "{} is not out of service", uuid);
  }
  auto& r = it->second;
  r.faults.clear();
  r.resets = 0;
  host_.event(r, false, "ReleasedByOperator", fmt::format("{}: validating before it returns", gpu_name(r)));
  enter(r, Phase::kValidating, "returned by an operator: validating");
  step_validating(r);
  return {};
}

std::vector<Condition> Remediator::conditions() const {
  struct Class {
    const char* type;
    const char* healthy;
    std::vector<const GpuRecord*> gpus;
  };
  std::array<Class, 3> classes = {Class{kConditionResetRequired, "no GPU needs a reset", {}},
                                  Class{kConditionRebootRequired, "no GPU needs a reboot of the node", {}},
                                  Class{kConditionNeedsAttention, "no GPU is quarantined or waits for an operator", {}}};
  for (const auto& [uuid, r] : records_) {
    if (r.phase == Phase::kInService) continue;
    if (r.phase == Phase::kQuarantined || r.phase == Phase::kNeedsOperator || r.action == Action::kReport) {
      classes[2].gpus.push_back(&r);
    } else if (r.action == Action::kRebootNode) {
      classes[1].gpus.push_back(&r);
    } else if (r.action == Action::kResetGpu) {
      classes[0].gpus.push_back(&r);
    }
  }
  std::vector<Condition> out;
  for (const auto& c : classes) {
    Condition k;
    k.type = c.type;
    if (c.gpus.empty()) {
      k.status = "False";
      k.reason = "GpusHealthy";
      k.message = c.healthy;
    } else {
      k.status = "True";
      // The reason is the furthest phase among the GPUs of the class, in CamelCase.
      std::string phase = phase_name(c.gpus.front()->phase);
      std::string reason;
      bool up = true;
      for (char ch : phase) {
        if (ch == '-') {
          up = true;
          continue;
        }
        reason += up ? static_cast<char>(std::toupper(static_cast<unsigned char>(ch))) : ch;
        up = false;
      }
      k.reason = reason;
      for (const auto* r : c.gpus) {
        k.message += fmt::format("{}{}: {} [{}: {}]", k.message.empty() ? "" : "; ", gpu_name(*r), r->reason,
                                 phase_name(r->phase), r->message);
      }
      if (k.message.size() > 1024) k.message = k.message.substr(0, 1021) + "...";
    }
    out.push_back(std::move(k));
  }
  return out;
}

}  // namespace kgpu::health
