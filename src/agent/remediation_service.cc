#include "agent/remediation_service.h"

#include <fmt/format.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <filesystem>

#include "agent/node_pods.h"
#include "agent/plugin_manager.h"
#include "agent/validate.h"
#include "common/files.h"
#include "common/log.h"
#include "common/strings.h"
#include "common/timestamp.h"
#include "sharing/allocate.h"

namespace kgpu::agent {

namespace {

constexpr size_t kMaxQueued = 4096;
constexpr size_t kMaxAnnotationBytes = 64 * 1024;

std::string now_rfc3339(const Clock& clock) { return format_rfc3339(clock.system_now()); }

}  // namespace

// The production host: this node's API objects, NVML and the device plugin.
class RemediationService::Host : public health::RemediationHost {
 public:
  explicit Host(RemediationService& s) : s_(s) {}

  void withhold(const health::GpuRecord& r) override { s_.plugins_.withhold(r.uuid, r.reason); }
  void release(const health::GpuRecord& r) override { s_.plugins_.release(r.uuid); }

  Result<std::vector<health::PodRef>> gpu_pods(const health::GpuRecord& r) override {
    auto pods = s_.view_.list_pods();
    if (!pods) return std::unexpected(pods.error());
    std::vector<health::PodRef> out;
    for (const auto& p : *pods) {
      if (!pod_finished(p) && pod_uses_any(p, {r.uuid})) out.push_back(pod_ref(p));
    }
    return out;
  }

  Result<std::vector<health::PodRef>> node_pods() override {
    auto pods = s_.view_.list_pods();
    if (!pods) return std::unexpected(pods.error());
    std::vector<health::PodRef> out;
    for (const auto& p : *pods) {
      if (pod_finished(p)) continue;
      const auto& m = p["metadata"];
      if (m.value("annotations", nlohmann::json::object()).contains("kubernetes.io/config.mirror")) continue;
      bool daemon = false;
      for (const auto& o : m.value("ownerReferences", nlohmann::json::array())) {
        daemon = daemon || o.value("kind", "") == "DaemonSet";
      }
      if (!daemon) out.push_back(pod_ref(p));
    }
    return out;
  }

  Result<health::Eviction> evict(const health::PodRef& p) override { return evict_pod(s_.client_, p); }

  Result<bool> acquire_budget(const health::GpuRecord& r, std::string* holders) override {
    const std::string key = slot_key(r);
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto cm = s_.client_.get(kube::resources::kConfigMaps, ns(), kBudgetConfigMap);
      if (!cm && cm.error().not_found()) {
        nlohmann::json fresh = {{"apiVersion", "v1"},
                                {"kind", "ConfigMap"},
                                {"metadata", {{"name", kBudgetConfigMap}, {"namespace", ns()}}},
                                {"data", {{"maxUnavailable", std::to_string(s_.opt_.max_unavailable)}}}};
        auto created = s_.client_.create(kube::resources::kConfigMaps, ns(), fresh);
        if (!created && !created.error().already_exists()) {
          return std::unexpected(created.error().to_error());
        }
        continue;
      }
      if (!cm) return std::unexpected(cm.error().to_error());
      auto data = cm->value("data", nlohmann::json::object());
      if (data.contains(key)) return true;  // ours already (a restart)
      int max = s_.opt_.max_unavailable;
      if (data.contains("maxUnavailable") && data["maxUnavailable"].is_string()) {
        const auto text = data["maxUnavailable"].get<std::string>();
        int n = -1;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec == std::errc() && end == text.data() + text.size() && n >= 0) max = n;
      }
      std::vector<std::string> held;
      for (const auto& [k, v] : data.items()) {
        if (k.starts_with("gpu.")) held.push_back(k.substr(4));
      }
      if (static_cast<int>(held.size()) >= max) {
        *holders = fmt::format("{} of {}: {}", held.size(), max, fmt::join(held, ", "));
        return false;
      }
      (*cm)["data"] = data;
      (*cm)["data"][key] = now_rfc3339(s_.clock_);
      auto updated = s_.client_.update(kube::resources::kConfigMaps, ns(), kBudgetConfigMap, *cm);
      if (updated) return true;
      if (!updated.error().conflict()) return std::unexpected(updated.error().to_error());
    }
    *holders = "another node (the ConfigMap kept changing)";
    return false;
  }

  Result<void> release_budget(const health::GpuRecord& r) override {
    const std::string key = slot_key(r);
    for (int attempt = 0; attempt < 3; ++attempt) {
      auto cm = s_.client_.get(kube::resources::kConfigMaps, ns(), kBudgetConfigMap);
      if (!cm && cm.error().not_found()) return {};
      if (!cm) return std::unexpected(cm.error().to_error());
      if (!cm->contains("data") || !(*cm)["data"].contains(key)) return {};
      (*cm)["data"].erase(key);
      auto updated = s_.client_.update(kube::resources::kConfigMaps, ns(), kBudgetConfigMap, *cm);
      if (updated) return {};
      if (!updated.error().conflict()) return std::unexpected(updated.error().to_error());
    }
    return fail(ErrorCode::kUnavailable, "the budget ConfigMap kept changing");
  }

  Result<unsigned> processes(const health::GpuRecord& r) override {
    auto p = s_.node_.processes(r.index);
    if (!p) return std::unexpected(p.error());
    return static_cast<unsigned>(p->size());
  }

  Result<void> reset(const health::GpuRecord& r) override {
    log::warn(fmt::format("remediation: resetting GPU {}", r.index), {log::kv("gpu", r.uuid)});
    return s_.node_.reset(r.index, r.uuid);
  }

  // The `nvml` rule of `kgpu validate` and, where the device plugins keep a CDI spec, its `cdi`
  // rule for this GPU (a node whose plugins write none, or could not write one for reasons of the
  // whole node, is not held against the GPU).
  Result<void> validate(const health::GpuRecord& r) override {
    if (auto ok = validate_gpu(s_.node_, r.index, r.uuid); !ok) return ok;
    if (s_.opt_.cdi_root.empty()) return {};
    const auto spec = fmt::format("{}/{}-{}.json", s_.opt_.cdi_root, sharing::kCdiVendor, sharing::kCdiClass);
    std::error_code ec;
    if (!std::filesystem::exists(spec, ec)) return {};
    return validate_cdi(s_.opt_.cdi_root, {r.uuid});
  }

  Result<void> cordon(bool on) override {
    auto r = s_.client_.patch(kube::resources::kNodes, "", s_.view_.node_name(), kube::PatchType::kMerge,
                              {{"spec", {{"unschedulable", on ? nlohmann::json(true) : nlohmann::json(nullptr)}}}});
    if (!r) return std::unexpected(r.error().to_error());
    log::warn(on ? "remediation: node cordoned" : "remediation: node uncordoned");
    return {};
  }

  std::string boot_id() override {
    auto text = read_file_limited(s_.opt_.boot_id_file, 256);
    return text ? trim(*text, " \t\r\n") : std::string();
  }

  void cleared(const health::GpuRecord& r) override { s_.classifier_.clear(r.uuid); }

  void event(const health::GpuRecord&, bool warning, const std::string& reason, const std::string& message) override {
    log::info("remediation: " + reason + ": " + message);
    if (s_.events_) {
      s_.events_->record({"v1", "Node", "", s_.view_.node_name(), s_.node_uid_}, warning ? "Warning" : "Normal", reason,
                         "Remediate", message);
    }
  }

 private:
  std::string ns() const { return s_.opt_.budget_namespace; }
  std::string slot_key(const health::GpuRecord& r) const { return "gpu." + s_.view_.node_name() + "." + r.uuid; }
  RemediationService& s_;
};

Result<std::unique_ptr<RemediationService>> RemediationService::create(gpu::NodeGpus& node, DevicePluginManager& plugins,
                                                                       kube::Client& client, ClusterView& view,
                                                                       RemediationOptions options) {
  health::FaultActions table = health::FaultActions::defaults();
  if (!options.fault_actions_file.empty()) {
    auto text = read_file_limited(options.fault_actions_file, 64 * 1024);
    if (!text) return std::unexpected(text.error().wrap("--fault-actions"));
    auto t = table.overlay(*text, options.fault_actions_file);
    if (!t) return std::unexpected(t.error());
    table = std::move(*t);
  }
  return std::unique_ptr<RemediationService>(
      new RemediationService(node, plugins, client, view, std::move(options), std::move(table)));
}

RemediationService::RemediationService(gpu::NodeGpus& node, DevicePluginManager& plugins, kube::Client& client,
                                       ClusterView& view, RemediationOptions options, health::FaultActions table)
    : node_(node),
      plugins_(plugins),
      client_(client),
      view_(view),
      opt_(std::move(options)),
      clock_(*opt_.clock),
      table_(std::move(table)),
      classifier_(table_, clock_) {
  host_ = std::make_unique<Host>(*this);
  remediator_ = std::make_unique<health::Remediator>(opt_.policy, *host_, clock_);
  kube::EventRecorderOptions eo;
  eo.reporting_controller = "kgpu.io/agent";
  eo.reporting_instance = view_.node_name();
  eo.clock = &clock_;
  events_ = std::make_unique<kube::EventRecorder>(client_, eo);
}

RemediationService::~RemediationService() { stop(); }

void RemediationService::start() {
  log::info(fmt::format("remediation: {} ({} XIDs in the fault action table)", health::mode_name(opt_.policy.mode),
                        table_.xids.size()));
  thread_ = std::thread([this] { run(); });
}

void RemediationService::stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (events_) events_->flush(std::chrono::seconds(1));
}

void RemediationService::on_fault(const gpu::Event& e) {
  {
    std::lock_guard lock(mu_);
    if (queue_.size() >= kMaxQueued) queue_.pop_front();
    queue_.push_back(e);
  }
  cv_.notify_all();
}

void RemediationService::run() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      clock_.wait_for(cv_, lock, opt_.interval, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
    }
    round();
  }
}

std::map<std::string, unsigned> RemediationService::gpu_indexes() {
  std::map<std::string, unsigned> out;
  auto n = node_.device_count();
  if (!n) return out;
  for (unsigned i = 0; i < *n; ++i) {
    const auto p = node_.probe(i);
    if (!p.uuid.empty()) out[p.uuid] = i;
  }
  return out;
}

void RemediationService::handle(const std::string& uuid, unsigned index, const health::Verdict& v,
                                const std::string& source) {
  {
    std::lock_guard lock(mu_);
    ++faults_by_action_[health::action_name(v.event_action)];
  }
  const std::string gpu = fmt::format("GPU {} ({})", index, uuid);
  if (v.event_action == health::Action::kRestartApp) {
    host_->event({}, true, "GpuApplicationError", fmt::format("{}: {}; the GPU stays in service", gpu, v.reason));
  } else if (v.event_action == health::Action::kNone && !v.changed()) {
    host_->event({}, false, "GpuFault", fmt::format("{}: {}", gpu, v.reason));
  }
  log::info(fmt::format("remediation: {}: {} (recommendation {})", source, v.reason,
                        health::action_name(v.recommendation)),
            {log::kv("gpu", uuid)});
  remediator_->on_verdict(uuid, index, v);
  if (health::out_of_service(v.recommendation)) conditions_on_ = true;
  dirty_ = true;
}

void RemediationService::probe_signals() {
  using health::Signal;
  auto n = node_.device_count();
  if (!n) return;
  std::map<unsigned, std::string> known;
  for (const auto& [uuid, r] : remediator_->records()) known[r.index] = uuid;
  for (unsigned i = 0; i < *n; ++i) {
    const auto p = node_.probe(i);
    std::string uuid = p.uuid.empty() && known.contains(i) ? known[i] : p.uuid;
    if (uuid.empty()) continue;
    const auto f = node_.fault_signals(i);
    auto& state = signal_state_[uuid];
    auto edge = [&](Signal s, bool on, const std::string& detail) {
      bool& was = state[health::signal_name(s)];
      if (on && !was) handle(uuid, i, classifier_.on_signal(uuid, s, detail), "probe");
      was = on;
    };
    edge(Signal::kFallenOffBus, p.lost || f.lost, "(NVML answers GPU_IS_LOST)");
    if (p.lost || f.lost) continue;
    edge(Signal::kRowRemapPending, f.remap_pending.value_or(false), "");
    edge(Signal::kRowRemapFailure, f.remap_failure.value_or(false), "");
    edge(Signal::kEccVolatileUncorrected, f.ecc_volatile_uncorrected.value_or(0) > 0,
         fmt::format("({} errors)", f.ecc_volatile_uncorrected.value_or(0)));
    edge(Signal::kThermalSlowdown, f.thermal_slowdown.value_or(false), "");
    edge(Signal::kPowerSlowdown, f.power_slowdown.value_or(false), "");
  }
}

bool RemediationService::restore() {
  auto node = client_.get(kube::resources::kNodes, "", view_.node_name());
  if (!node) {
    log::warn("remediation: cannot read the node yet: " + node.error().text());
    return false;
  }
  node_uid_ = (*node)["metadata"].value("uid", "");
  for (const auto& c : node->value("status", nlohmann::json::object()).value("conditions", nlohmann::json::array())) {
    const auto type = c.value("type", "");
    if (type == health::kConditionResetRequired || type == health::kConditionRebootRequired ||
        type == health::kConditionNeedsAttention) {
      transitions_[type] = {c.value("status", ""), c.value("lastTransitionTime", "")};
      conditions_on_ = true;
    }
  }
  const auto ann = (*node)["metadata"].value("annotations", nlohmann::json::object());
  if (!ann.contains(kAnnotationRemediation)) return true;
  const auto text = ann[kAnnotationRemediation].is_string() ? ann[kAnnotationRemediation].get<std::string>() : "";
  std::map<std::string, health::GpuRecord> records;
  auto parsed = nlohmann::json::parse(text, nullptr, false);
  if (text.size() > kMaxAnnotationBytes || parsed.is_discarded() || !parsed.is_object() ||
      !parsed.value("gpus", nlohmann::json()).is_object()) {
    log::error(fmt::format("remediation: the node annotation {} is not a record (ignored, rewritten)", kAnnotationRemediation));
    dirty_ = true;
    return true;
  }
  for (const auto& [uuid, j] : parsed["gpus"].items()) {
    auto r = health::GpuRecord::from_json(j);
    if (!r) {
      log::error(fmt::format("remediation: {}: gpus.{}: {} (dropped)", kAnnotationRemediation, uuid, r.error().message));
      continue;
    }
    if (r->phase != health::Phase::kInService) {
      log::info(fmt::format("remediation: resuming GPU {} in phase {}: {}", r->index, health::phase_name(r->phase),
                            r->message),
                {log::kv("gpu", uuid)});
    }
    records[uuid] = *r;
  }
  published_ = records;
  remediator_->restore(std::move(records));
  return true;
}

void RemediationService::operator_releases() {
  const auto& records = remediator_->records();
  const bool waiting = std::any_of(records.begin(), records.end(), [](const auto& kv) {
    return kv.second.phase == health::Phase::kQuarantined || kv.second.phase == health::Phase::kNeedsOperator;
  });
  if (!waiting || clock_.steady_now() < next_release_check_) return;
  next_release_check_ = clock_.steady_now() + opt_.probe_interval;
  auto node = client_.get(kube::resources::kNodes, "", view_.node_name());
  if (!node) return;
  const auto ann = (*node)["metadata"].value("annotations", nlohmann::json::object());
  if (!ann.contains(kAnnotationRemediationRelease) || !ann[kAnnotationRemediationRelease].is_string()) return;
  const auto text = ann[kAnnotationRemediationRelease].get<std::string>();
  size_t start = 0;
  while (start <= text.size() && start < 64 * 1024) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string uuid = trim(std::string_view(text).substr(start, comma - start), " \t");
    if (!uuid.empty()) {
      if (auto ok = remediator_->release_by_operator(uuid); !ok) {
        log::warn(fmt::format("remediation: {}: {}", kAnnotationRemediationRelease, ok.error().message));
      }
    }
    start = comma + 1;
  }
  (void)client_.patch(kube::resources::kNodes, "", view_.node_name(), kube::PatchType::kMerge,
                      {{"metadata", {{"annotations", {{kAnnotationRemediationRelease, nullptr}}}}}});
  dirty_ = true;
}

bool RemediationService::publish() {
  const auto& records = remediator_->records();
  for (const auto& [uuid, r] : records) {
    const auto it = published_.find(uuid);
    if (it == published_.end() || it->second.message != r.message || it->second.phase != r.phase) {
      log::info(fmt::format("remediation: GPU {} {}: {}", r.index, health::phase_name(r.phase), r.message),
                {log::kv("gpu", uuid)});
    }
  }
  bool any_out = false;
  for (const auto& [uuid, r] : records) any_out = any_out || r.phase != health::Phase::kInService;
  // From the first GPU out of service on (handle(), or records restored), the conditions are kept,
  // even if that state never reached the API (remediated within a round, or while it failed): the
  // node then shows them False.
  if (any_out) conditions_on_ = true;
  nlohmann::json gpus = nlohmann::json::object();
  for (const auto& [uuid, r] : records) {
    if (r.phase != health::Phase::kInService || !r.faults.empty()) gpus[uuid] = r.to_json();
  }
  const std::string value = nlohmann::json{{"mode", health::mode_name(opt_.policy.mode)}, {"gpus", gpus}}.dump();
  if (auto ok = view_.annotate_node(kAnnotationRemediation, value); !ok) {
    log::warn("remediation: the node annotation could not be written (retried): " + ok.error().message);
    return false;
  }
  published_ = records;
  if (!conditions_on_) return true;
  const std::string now = now_rfc3339(clock_);
  nlohmann::json conditions = nlohmann::json::array();
  for (const auto& c : remediator_->conditions()) {
    auto& [status, since] = transitions_[c.type];
    if (status != c.status || since.empty()) since = now;
    status = c.status;
    conditions.push_back({{"type", c.type},
                          {"status", c.status},
                          {"reason", c.reason},
                          {"message", c.message},
                          {"lastHeartbeatTime", now},
                          {"lastTransitionTime", since}});
  }
  auto r = client_.patch(kube::resources::kNodes, "", view_.node_name(), kube::PatchType::kStrategic,
                         {{"status", {{"conditions", conditions}}}}, "status");
  if (!r) {
    log::warn("remediation: the node conditions could not be written (retried): " + r.error().text());
    return false;
  }
  return true;
}

void RemediationService::round() {
  std::deque<gpu::Event> events;
  {
    std::lock_guard lock(mu_);
    events.swap(queue_);
  }
  if (!restored_) restored_ = restore();
  std::map<std::string, unsigned> indexes;
  for (const auto& e : events) {
    if (e.kind != gpu::EventKind::kXid && e.kind != gpu::EventKind::kGpuLost) continue;
    std::string uuid = e.uuid;
    unsigned index = e.gpu_index.value_or(0);
    if (uuid.empty()) {
      if (!e.gpu_index) continue;  // NVML did not say which GPU: the health book marks them all
      const auto p = node_.probe(index);
      uuid = p.uuid;
      if (uuid.empty()) continue;
    }
    if (!e.gpu_index) {
      if (indexes.empty()) indexes = gpu_indexes();
      if (!indexes.contains(uuid)) continue;
      index = indexes[uuid];
    }
    const uint64_t xid = e.kind == gpu::EventKind::kGpuLost ? 79 : e.xid;
    std::optional<unsigned> recovery;
    if (const auto* entry = table_.xid(xid); entry && entry->rule == health::Rule::kRecoveryAction) {
      recovery = node_.recovery_action(index);
    }
    handle(uuid, index, classifier_.on_xid(uuid, xid, recovery), "NVML event");
  }
  if (clock_.steady_now() >= next_probe_) {
    next_probe_ = clock_.steady_now() + opt_.probe_interval;
    probe_signals();
  }
  if (restored_) operator_releases();
  if (restored_ && remediator_->step()) dirty_ = true;
  if (remediator_->records() != published_) dirty_ = true;
  if (dirty_ && restored_) {
    if (publish()) {
      dirty_ = false;
    } else {
      std::lock_guard lock(mu_);
      ++write_failures_;
    }
  }
  std::lock_guard lock(mu_);
  phases_.clear();
  for (const auto& [uuid, r] : remediator_->records()) phases_[uuid] = {r.index, health::phase_name(r.phase)};
}

std::string RemediationService::metrics_text() const {
  std::lock_guard lock(mu_);
  std::string out =
      "# HELP kgpu_remediation_faults_total GPU faults classified, by the action the fault action table gives.\n"
      "# TYPE kgpu_remediation_faults_total counter\n";
  for (const char* a : {"none", "restart-app", "reset-gpu", "reboot-node", "report"}) {
    const auto it = faults_by_action_.find(a);
    out += fmt::format("kgpu_remediation_faults_total{{action=\"{}\"}} {}\n", a, it == faults_by_action_.end() ? 0 : it->second);
  }
  out += "# HELP kgpu_remediation_phase The remediation phase of each GPU that had a fault (1 for its phase).\n"
         "# TYPE kgpu_remediation_phase gauge\n";
  for (const auto& [uuid, p] : phases_) {
    out += fmt::format("kgpu_remediation_phase{{gpu=\"{}\",UUID=\"{}\",phase=\"{}\"}} 1\n", p.first, uuid, p.second);
  }
  out += "# HELP kgpu_remediation_write_failures_total Rounds whose node annotation or condition write failed (retried).\n"
         "# TYPE kgpu_remediation_write_failures_total counter\n";
  out += fmt::format("kgpu_remediation_write_failures_total {}\n", write_failures_);
  return out;
}

}  // namespace kgpu::agent
