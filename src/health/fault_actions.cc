#include "health/fault_actions.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cctype>
#include <set>

#include "common/yaml_load.h"
#include "sharing/config.h"

namespace kgpu::health {

// The embedded deploy/health/xid-actions.yaml (generated at build time).
extern const char* const kDefaultFaultActions;

namespace {

constexpr std::array<const char*, 5> kActionNames = {"none", "restart-app", "reset-gpu", "reboot-node", "report"};
constexpr std::array<const char*, kSignals> kSignalNames = {
    "eccVolatileUncorrected", "rowRemapPending", "rowRemapFailure", "retiredPagesPending",
    "fallenOffBus",           "nvlinkErrors",    "thermalSlowdown", "powerSlowdown"};
constexpr std::array<const char*, kRecoveryActions> kRecoveryNames = {
    "NONE", "GPU_RESET", "NODE_REBOOT", "DRAIN_P2P", "DRAIN_AND_RESET", "RECOVER_IMEX_DOMAIN", "BUS_RESET", "SYSTEM_REBOOT"};

constexpr YamlLimits kLimits{64 * 1024, 20'000, 16};
constexpr size_t kMaxXids = 4096;

template <typename... Args>
std::unexpected<Error> bad(const std::string& source, const YAML::Node& n, const std::string& field,
                           fmt::format_string<Args...> f, Args&&... args) {
  return yaml_error(source, n, field, f, std::forward<Args>(args)...);
}

Result<Action> action_at(const std::string& source, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) return bad(source, n, field, "expected an action");
  const auto a = parse_action(n.Scalar());
  if (!a) {
    return bad(source, n, field, "unknown action '{}' (none, restart-app, reset-gpu, reboot-node, report)", n.Scalar());
  }
  return *a;
}

Result<void> only_keys(const std::string& source, const YAML::Node& n, const std::string& field,
                       const std::set<std::string>& keys) {
  for (const auto& kv : n) {
    const auto k = kv.first.Scalar();
    if (!keys.contains(k)) return bad(source, kv.first, field, "unknown field '{}'", k);
  }
  return {};
}

Result<void> read_xids(const std::string& source, const YAML::Node& list, FaultActions& t) {
  if (!list.IsSequence()) return bad(source, list, "xids", "expected a list");
  if (list.size() > kMaxXids) return bad(source, list, "xids", "more than {} entries", kMaxXids);
  std::set<uint64_t> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const auto e = list[i];
    const auto field = fmt::format("xids[{}]", i);
    if (!e.IsMap()) return bad(source, e, field, "expected a mapping with xid and action");
    if (auto ok = only_keys(source, e, field, {"xid", "mnemonic", "action", "rule"}); !ok) return std::unexpected(ok.error());
    if (!e["xid"] || !e["action"]) return bad(source, e, field, "needs xid and action");
    XidEntry x;
    try {
      x.xid = e["xid"].as<uint64_t>();
    } catch (const YAML::Exception&) {
      return bad(source, e["xid"], field + ".xid", "'{}' is not an XID number", e["xid"].Scalar());
    }
    if (!seen.insert(x.xid).second) return bad(source, e, field + ".xid", "XID {} is listed twice", x.xid);
    auto a = action_at(source, e["action"], field + ".action");
    if (!a) return std::unexpected(a.error());
    x.action = *a;
    if (e["mnemonic"]) x.mnemonic = e["mnemonic"].Scalar();
    if (e["rule"]) {
      const auto r = e["rule"].Scalar();
      if (r == "defer") {
        x.rule = Rule::kDefer;
      } else if (r == "recovery-action") {
        x.rule = Rule::kRecoveryAction;
      } else {
        return bad(source, e["rule"], field + ".rule", "unknown rule '{}' (defer, recovery-action)", r);
      }
    }
    t.xids[x.xid] = x;
  }
  return {};
}

template <size_t N>
Result<void> read_named(const std::string& source, const YAML::Node& map, const std::string& field,
                        const std::array<const char*, N>& names, std::array<Action, N>& out) {
  if (!map.IsMap()) return bad(source, map, field, "expected a mapping");
  for (const auto& kv : map) {
    const auto k = kv.first.Scalar();
    size_t i = 0;
    while (i < N && k != names[i]) ++i;
    if (i == N) {
      std::string known;
      for (const auto* n : names) known += (known.empty() ? "" : ", ") + std::string(n);
      return bad(source, kv.first, field, "unknown key '{}' ({})", k, known);
    }
    auto a = action_at(source, kv.second, field + "." + k);
    if (!a) return std::unexpected(a.error());
    out[i] = *a;
  }
  return {};
}

}  // namespace

const char* action_name(Action a) { return kActionNames[static_cast<size_t>(a)]; }

std::optional<Action> parse_action(std::string_view s) {
  for (size_t i = 0; i < kActionNames.size(); ++i) {
    if (s == kActionNames[i]) return static_cast<Action>(i);
  }
  return std::nullopt;
}

const char* signal_name(Signal s) { return kSignalNames[static_cast<size_t>(s)]; }

const char* recovery_action_name(unsigned v) { return v < kRecoveryActions ? kRecoveryNames[v] : "UNKNOWN"; }

const XidEntry* FaultActions::xid(uint64_t x) const {
  const auto it = xids.find(x);
  return it == xids.end() ? nullptr : &it->second;
}

Result<FaultActions> FaultActions::overlay(std::string_view text, const std::string& source) const {
  auto loaded = load_yaml(text, source, kLimits);
  if (!loaded) return std::unexpected(loaded.error());
  const YAML::Node root = *loaded;
  FaultActions t = *this;
  if (!root || root.IsNull()) return t;
  if (!root.IsMap()) return bad(source, root, "(top)", "expected a mapping");
  if (auto ok = only_keys(source, root, "(top)",
                          {"version", "unknown", "companionWindow", "xids", "signals", "recoveryActions"});
      !ok) {
    return std::unexpected(ok.error());
  }
  if (root["version"] && root["version"].Scalar() != "v1") {
    return bad(source, root["version"], "version", "unsupported version '{}' (v1)", root["version"].Scalar());
  }
  if (root["unknown"]) {
    auto a = action_at(source, root["unknown"], "unknown");
    if (!a) return std::unexpected(a.error());
    t.unknown = *a;
  }
  if (root["companionWindow"]) {
    auto d = sharing::parse_duration(root["companionWindow"].Scalar());
    if (!d) return bad(source, root["companionWindow"], "companionWindow", "{}", d.error().message);
    t.companion_window = *d;
  }
  if (root["xids"]) {
    if (auto ok = read_xids(source, root["xids"], t); !ok) return std::unexpected(ok.error());
  }
  if (root["signals"]) {
    if (auto ok = read_named(source, root["signals"], "signals", kSignalNames, t.signals); !ok) {
      return std::unexpected(ok.error());
    }
  }
  if (root["recoveryActions"]) {
    if (auto ok = read_named(source, root["recoveryActions"], "recoveryActions", kRecoveryNames, t.recovery); !ok) {
      return std::unexpected(ok.error());
    }
  }
  return t;
}

const FaultActions& FaultActions::defaults() {
  static const FaultActions table = [] {
    auto t = FaultActions{}.overlay(kDefaultFaultActions, "deploy/health/xid-actions.yaml");
    if (!t) throw std::logic_error("the built-in fault action table does not load: " + t.error().message);
    return *t;
  }();
  return table;
}

// --- Classifier ---------------------------------------------------------------------------------

Verdict Classifier::raise(GpuBook& b, Action a, std::string reason) {
  Verdict v;
  v.previous = b.recommendation;
  v.event_action = a;
  if (a > b.recommendation) {
    b.recommendation = a;
    b.reason = reason;
  }
  v.recommendation = b.recommendation;
  v.reason = std::move(reason);
  return v;
}

Verdict Classifier::on_xid(const std::string& gpu, uint64_t xid, std::optional<unsigned> recovery_action) {
  auto& b = gpus_[gpu];
  const auto now = clock_.steady_now();
  const XidEntry* e = table_.xid(xid);
  const std::string name =
      e && !e->mnemonic.empty() ? fmt::format("XID {} ({})", xid, e->mnemonic) : fmt::format("XID {}", xid);
  if (e == nullptr) {
    return raise(b, table_.unknown,
                 fmt::format("XID {}: not in the fault action table, {}", xid,
                             table_.unknown == Action::kNone ? "no action" : action_name(table_.unknown)));
  }
  if (e->rule == Rule::kDefer) {
    if (b.last_xid != 0 && now - b.last_xid_at <= table_.companion_window) {
      Verdict v;
      v.previous = v.recommendation = b.recommendation;
      v.reason = fmt::format("{} follows XID {}: that XID decides", name, b.last_xid);
      return v;
    }
    return raise(b, e->action, fmt::format("{} alone: {}", name, action_name(e->action)));
  }
  if (e->rule == Rule::kRecoveryAction) {
    if (recovery_action && *recovery_action < kRecoveryActions) {
      const Action a = table_.recovery[*recovery_action];
      Verdict v;
      v.previous = b.recommendation;
      v.event_action = a;
      v.reason = fmt::format("{}: the driver's recovery action is {}: {}", name, recovery_action_name(*recovery_action),
                             action_name(a));
      b.recommendation = a;  // replaces, also downwards
      b.reason = v.reason;
      v.recommendation = a;
      return v;
    }
    Verdict v;
    v.previous = v.recommendation = b.recommendation;
    v.reason = b.last_xid != 0
                   ? fmt::format("{}: the driver's recovery action is unknown; the linked XID {} decides", name, b.last_xid)
                   : fmt::format("{}: the driver's recovery action is unknown and no XID came before it", name);
    return v;
  }
  b.last_xid = xid;
  b.last_xid_at = now;
  return raise(b, e->action, fmt::format("{}: {}", name, action_name(e->action)));
}

Verdict Classifier::on_signal(const std::string& gpu, Signal s, const std::string& detail) {
  auto& b = gpus_[gpu];
  const Action a = table_.signals[static_cast<size_t>(s)];
  return raise(b, a, fmt::format("{}{}{}: {}", signal_name(s), detail.empty() ? "" : " ", detail, action_name(a)));
}

void Classifier::clear(const std::string& gpu) { gpus_.erase(gpu); }

Action Classifier::recommendation(const std::string& gpu) const {
  const auto it = gpus_.find(gpu);
  return it == gpus_.end() ? Action::kNone : it->second.recommendation;
}

std::string Classifier::reason(const std::string& gpu) const {
  const auto it = gpus_.find(gpu);
  return it == gpus_.end() ? std::string() : it->second.reason;
}

}  // namespace kgpu::health
