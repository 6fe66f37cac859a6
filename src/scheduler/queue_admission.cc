#include "scheduler/queue_admission.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "apiclient/client.h"
#include "apiclient/events.h"
#include "common/log.h"
#include "k8s/api/json.h"
#include "scheduler/gang.h"

namespace kgpu::scheduler {

namespace {

using nlohmann::json;

using k8s::api::text;

// Gate removals in flight at once: enough to hide the round trips, few enough not to crowd the API
// server's other clients.
constexpr size_t kParallelGateRemovals = 8;

}  // namespace

QueueAdmission::QueueAdmission(kube::Client& client, kube::EventRecorder* events, QueueAdmissionOptions o)
    : client_(client), events_(events), opt_(std::move(o)) {}

void QueueAdmission::reload() {
  const auto now = opt_.clock->steady_now();
  if (config_read_at_ && now - *config_read_at_ < opt_.config_interval) return;
  config_read_at_ = now;
  auto cm = client_.get(kube::resources::kConfigMaps, opt_.config_namespace, opt_.config_name);
  if (!cm) {
    if (!cm.error().not_found()) log::warn("queues: reading the config failed", {log::kv("error", cm.error().text())});
    if (cm.error().not_found() && config_) {
      config_.reset();  // deleted: no queues any more
      config_version_.clear();
    }
    return;
  }
  const std::string version = text(*cm, {"metadata", "resourceVersion"});
  if (version == config_version_) return;
  config_version_ = version;
  const std::string source = fmt::format("ConfigMap {}/{} queues.yaml", opt_.config_namespace, opt_.config_name);
  auto parsed = queues::parse_config(text(*cm, {"data", "queues.yaml"}), source);
  if (!parsed) {
    config_error_ = parsed.error().message;
    log::error("queues: config refused, keeping the last good one", {log::kv("error", config_error_)});
    if (events_ != nullptr) {
      events_->record(kube::EventTarget{"v1", "ConfigMap", opt_.config_namespace, opt_.config_name,
                                        text(*cm, {"metadata", "uid"})},
                      "Warning", "QueueConfigInvalid", "Load", config_error_ + (config_ ? "; the last good config stays" : ""));
    }
    return;
  }
  config_error_.clear();
  config_ = std::make_shared<const queues::Config>(std::move(*parsed));
  facts_.clear();
  log::info("queues: config loaded", {log::kv("queues", config_->queues.size())});
}

QueueRound QueueAdmission::round(const std::vector<kube::ObjectRef>& pods) {
  QueueRound out;
  reload();
  out.config_error = config_error_;
  std::vector<const json*> live;
  std::set<std::string> listed;
  for (const auto& p : pods) {
    const std::string uid = text(*p, {"metadata", "uid"});
    listed.insert(uid);
    if (!evicted_.contains(uid)) live.push_back(p.get());
  }
  std::erase_if(evicted_, [&](const std::string& u) { return !listed.contains(u); });
  const auto event = [&](const json& pod, bool warning, const char* reason, const std::string& note) {
    pod_event(events_, pod, warning, reason, note);
  };
  const queues::Config empty;
  const queues::Config& config = config_ ? *config_ : empty;
  std::map<std::string, std::vector<const json*>> members;
  facts_.keep_only(listed);
  const auto workloads = queues::workloads_of(config, live, &members, &facts_);
  // Gated pods no queue takes: let go.
  if (config_) {
    std::set<const json*> queued;
    for (const auto& [id, ps] : members) queued.insert(ps.begin(), ps.end());
    for (const json* p : live) {
      if (pod_finished(*p) || queued.contains(p) || !has_gang_gate(*p, queues::kQueueGate)) continue;
      if (remove_scheduling_gate(client_, *p, queues::kQueueGate)) {
        event(*p, false, "QueueNone", "in no queue of " + opt_.config_name + ": admitted without quota");
      }
    }
  }
  if (!config_) {
    for (const auto& w : workloads) out.waiting[w.id] = "no queue config read yet";
    return out;
  }
  const queues::Decision d = queues::admit(config, workloads);
  std::map<std::string, const queues::Workload*> by_id;
  for (const auto& w : workloads) by_id[w.id] = &w;
  // The admitted pods' gates go in parallel: a round admits hundreds at once, and each removal is
  // a round trip to the API server.
  std::vector<const json*> gated;
  for (const auto& id : d.admit)
    for (const json* p : members[id])
      if (has_gang_gate(*p, queues::kQueueGate)) gated.push_back(p);
  const auto removed = remove_scheduling_gates(client_, gated, queues::kQueueGate, kParallelGateRemovals);
  std::set<const json*> failed;
  for (size_t i = 0; i < gated.size(); ++i) {
    if (removed[i]) continue;
    failed.insert(gated[i]);
    log::warn("queues: admitting a pod failed",
              {log::kv("pod", text(*gated[i], {"metadata", "name"})), log::kv("error", removed[i].error().text())});
  }
  for (const auto& id : d.admit) {
    if (std::ranges::any_of(members[id], [&](const json* p) { return failed.contains(p); })) continue;
    out.admitted.push_back(id);
    said_.erase(id);
    for (const json* p : members[id])
      event(*p, false, "QueueAdmitted", fmt::format("{}: admitted by queue {}", by_id[id]->name, by_id[id]->queue));
  }
  for (const auto& [for_id, victims] : d.evict) {
    for (const auto& v : victims) {
      out.evicted.push_back(v);
      for (const json* p : members[v]) {
        event(*p, true, "QueueReclaimed",
              fmt::format("{} borrows in its cohort and is evicted so that queue {} gets its nominal quota back for {}",
                          by_id[v]->name, by_id[for_id]->queue, by_id[for_id]->name));
        // Its quota is freed only once the API took the eviction: a victim a PodDisruptionBudget
        // keeps (429) or an error leaves running still counts, so nothing is admitted over it.
        auto e = evict_pod(client_, *p);
        if (e) evicted_.insert(text(*p, {"metadata", "uid"}));
        if (!e)
          log::warn("queues: evicting a pod failed", {log::kv("pod", text(*p, {"metadata", "name"})), log::kv("error", e.error().text())});
      }
    }
  }
  for (const auto& [id, why] : d.waiting) {
    out.waiting[id] = why;
    // Once per wait: the numbers in the reason change with every admission around it.
    if (!said_.emplace(id, why).second) continue;
    for (const json* p : members[id]) event(*p, false, "QueueWaiting", why);
  }
  std::erase_if(said_, [&](const auto& kv) { return !by_id.contains(kv.first); });
  std::lock_guard lock(mu_);
  usage_ = queues::usage(config, workloads);
  metrics_config_ = config_;
  config_ok_ = config_error_.empty();
  return out;
}

std::string QueueAdmission::metrics_text() const {
  std::lock_guard lock(mu_);
  std::string s =
      "# HELP kgpu_queue_config_ok Whether the last queue config written was accepted (0: the last good one is in use).\n"
      "# TYPE kgpu_queue_config_ok gauge\n";
  s += fmt::format("kgpu_queue_config_ok {}\n", config_ok_ ? 1 : 0);
  if (!metrics_config_) return s;
  const auto family = [&](const char* name, const char* help) {
    s += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name, help, name);
  };
  const auto series = [&](const char* name, const std::string& queue, const queues::Key& k, int64_t v) {
    s += fmt::format("{}{{queue=\"{}\",resource=\"{}\",model=\"{}\"}} {}\n", name, queue, k.first, k.second, v);
  };
  family("kgpu_queue_nominal", "Nominal quota of the queue, in the resource's units.");
  for (const auto& q : metrics_config_->queues)
    for (const auto& x : q.quotas) series("kgpu_queue_nominal", q.name, {x.resource, x.model}, x.nominal);
  for (const auto& [name, help, pick] :
       {std::tuple{"kgpu_queue_used", "Quota used by the queue's admitted workloads.", &queues::QueueUsage::used},
        std::tuple{"kgpu_queue_borrowed", "Quota the queue uses beyond its nominal quota.", &queues::QueueUsage::borrowed},
        std::tuple{"kgpu_queue_pending", "Quota asked by the queue's workloads waiting for admission.",
                   &queues::QueueUsage::pending}}) {
    family(name, help);
    for (const auto& q : metrics_config_->queues) {
      const auto it = usage_.find(q.name);
      for (const auto& x : q.quotas) {
        const queues::Key k{x.resource, x.model};
        series(name, q.name, k, it == usage_.end() ? 0 : queues::amount_of(it->second.*pick, k));
      }
    }
  }
  family("kgpu_queue_workloads", "Workloads of the queue by state (admitted, pending).");
  for (const auto& q : metrics_config_->queues) {
    const auto it = usage_.find(q.name);
    const size_t a = it == usage_.end() ? 0 : it->second.admitted, w = it == usage_.end() ? 0 : it->second.waiting;
    s += fmt::format("kgpu_queue_workloads{{queue=\"{}\",state=\"admitted\"}} {}\n", q.name, a);
    s += fmt::format("kgpu_queue_workloads{{queue=\"{}\",state=\"pending\"}} {}\n", q.name, w);
  }
  return s;
}

}  // namespace kgpu::scheduler
