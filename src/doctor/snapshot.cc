#include "doctor/snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <ctime>

namespace kgpu::doctor {

namespace {

std::string key2(std::string_view a, std::string_view b) {
  std::string k;
  k.reserve(a.size() + b.size() + 1);
  k.append(a).push_back('/');
  k.append(b);
  return k;
}

std::string key3(std::string_view a, std::string_view b, std::string_view c) { return key2(key2(a, b), c); }

int to_int(std::string_view s) {
  int v = 0;
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

std::string_view str_of(const k8s::Node* n, std::string_view key) {
  const k8s::Node* v = n != nullptr ? n->find(key) : nullptr;
  return v != nullptr && v->is_scalar() ? v->text() : std::string_view{};
}

}  // namespace

std::optional<int64_t> parse_time(std::string_view t) {
  if (t.size() < 19 || t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != ' ') || t[13] != ':')
    return std::nullopt;
  std::tm tm{};
  tm.tm_year = to_int(t.substr(0, 4)) - 1900;
  tm.tm_mon = to_int(t.substr(5, 2)) - 1;
  tm.tm_mday = to_int(t.substr(8, 2));
  tm.tm_hour = to_int(t.substr(11, 2));
  tm.tm_min = to_int(t.substr(14, 2));
  tm.tm_sec = to_int(t.substr(17, 2));
  int64_t s = timegm(&tm);
  size_t i = 19;
  if (i < t.size() && t[i] == '.') {
    ++i;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') ++i;
  }
  if (i + 6 <= t.size() && (t[i] == '+' || t[i] == '-')) {
    const int64_t off = to_int(t.substr(i + 1, 2)) * 3600 + to_int(t.substr(i + 4, 2)) * 60;
    s += t[i] == '+' ? -off : off;
  }
  return s;
}

Snapshot Snapshot::from(k8s::LoadResult loaded) {
  Snapshot s;
  s.docs_ = std::move(loaded.documents);
  // The same object in several files (a full snapshot plus a fresher `kubectl get nodes`): the last
  // one read wins. kgpu.io documents (SnapshotInfo, ContainerLog) are not cluster objects: all kept.
  std::unordered_map<std::string, size_t> last;
  for (size_t i = 0; i < s.docs_.size(); ++i) {
    const auto& d = s.docs_[i];
    if (d.api_group() == "kgpu.io" || d.metadata.name.empty()) continue;
    last[key3(key2(d.api_group(), d.kind), d.metadata.namespace_, d.metadata.name)] = i;
  }
  if (last.size() < s.docs_.size()) {
    std::vector<k8s::Document> kept;
    kept.reserve(s.docs_.size());
    for (size_t i = 0; i < s.docs_.size(); ++i) {
      const auto& d = s.docs_[i];
      if (d.api_group() != "kgpu.io" && !d.metadata.name.empty() &&
          last[key3(key2(d.api_group(), d.kind), d.metadata.namespace_, d.metadata.name)] != i) {
        continue;
      }
      kept.push_back(std::move(s.docs_[i]));
    }
    s.docs_ = std::move(kept);
  }
  s.errors_ = std::move(loaded.errors);
  s.index();
  return s;
}

Result<Snapshot> Snapshot::load(const std::vector<std::string>& paths) {
  auto loaded = k8s::load_paths(paths);
  if (!loaded) return std::unexpected(loaded.error());
  return from(std::move(*loaded));
}

void Snapshot::index() {
  int64_t latest = 0;
  const auto seen = [&](std::string_view t) {
    if (auto v = parse_time(t)) latest = std::max(latest, *v);
  };
  for (const auto& d : docs_) {
    const std::string_view kind = d.kind;
    if (kind == "Pod") {
      pods.push_back({&d, std::move(*k8s::as_pod(d))});
    } else if (kind == "Node") {
      nodes.push_back({&d, std::move(*k8s::as_node(d))});
    } else if (kind == "Event") {
      auto e = k8s::as_event(d);
      seen(e->last_timestamp.empty() ? e->event_time : e->last_timestamp);
      events.push_back({&d, std::move(*e)});
    } else if (kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet") {
      if (auto w = k8s::as_workload(d)) workloads.push_back({&d, std::move(*w)});
    } else if (kind == "Job") {
      jobs.push_back({&d, std::move(*k8s::as_job(d))});
    } else if (kind == "CronJob") {
      cron_jobs.push_back({&d, std::move(*k8s::as_cron_job(d))});
    } else if (kind == "ResourceQuota") {
      quotas.push_back({&d, std::move(*k8s::as_resource_quota(d))});
    } else if (kind == "PriorityClass") {
      priority_classes.push_back({&d, std::move(*k8s::as_priority_class(d))});
    } else if (kind == "PodDisruptionBudget") {
      pdbs.push_back({&d, std::move(*k8s::as_pod_disruption_budget(d))});
    } else if (kind == "HorizontalPodAutoscaler") {
      hpas.push_back({&d, std::move(*k8s::as_horizontal_pod_autoscaler(d))});
    } else if (kind == "Namespace") {
      namespaces.push_back({&d, std::move(*k8s::as_namespace(d))});
    } else if (kind == "PrometheusRule") {
      prometheus_rules.push_back({&d, std::move(*k8s::as_prometheus_rule(d))});
    } else if (kind == "Service") {
      services.push_back({&d, std::move(*k8s::as_service(d))});
    } else if (kind == "ConfigMap") {
      config_maps.push_back({&d, std::move(*k8s::as_config_map(d))});
    } else if (kind == "ResourceClaim") {
      claims.push_back({&d, std::move(*k8s::as_resource_claim(d))});
    } else if (kind == "ResourceClaimTemplate") {
      claim_templates.push_back({&d, std::move(*k8s::as_resource_claim_template(d))});
    } else if (kind == "DeviceClass") {
      device_classes.push_back({&d, std::move(*k8s::as_device_class(d))});
    } else if (kind == "ResourceSlice") {
      slices.push_back({&d, std::move(*k8s::as_resource_slice(d))});
    } else if (kind == "ServiceMonitor" || kind == "PodMonitor") {
      monitors.push_back(&d);
    } else if (kind == "ContainerLog") {
      const k8s::Node* prev = d.root->find("previous");
      logs.push_back({&d, d.metadata.namespace_, d.metadata.name, str_of(d.root, "container"),
                      prev != nullptr && prev->as_bool().value_or(false), str_of(d.root, "text")});
    } else if (kind == "SnapshotInfo") {
      collected_at_ = std::string(str_of(d.root, "collectedAt"));
      if (const k8s::Node* errs = d.root->find("errors")) {
        for (const auto& e : errs->items()) collection_errors_.emplace_back(e.text());
      }
    }
  }
  if (auto t = parse_time(collected_at_)) {
    now_ = *t;
  } else {
    if (latest == 0) {
      for (const auto& d : docs_) seen(d.metadata.creation_timestamp);
    }
    now_ = latest;
  }
  for (size_t i = 0; i < pods.size(); ++i) {
    pod_index_.emplace(key2(pods[i].ns(), pods[i].name()), i);
    if (const auto& n = pods[i].v.spec.node_name; !n->empty()) pods_by_node_[std::string(*n)].push_back(i);
    pod_refs_.push_back({pods[i].doc, &pods[i].v});
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    node_index_.emplace(std::string(nodes[i].name()), i);
    node_refs_.push_back({nodes[i].doc, &nodes[i].v});
  }
  for (size_t i = 0; i < workloads.size(); ++i) {
    workload_index_.emplace(key3(workloads[i].doc->kind, workloads[i].ns(), workloads[i].name()), i);
  }
  for (size_t i = 0; i < events.size(); ++i) {
    const auto& o = events[i].v.involved_object;
    events_by_object_[key3(o.kind, o.namespace_, o.name)].push_back(i);
  }
  for (size_t i = 0; i < logs.size(); ++i) logs_by_pod_[key2(logs[i].ns, logs[i].pod)].push_back(i);
}

const Obj<k8s::Pod>* Snapshot::pod(std::string_view ns, std::string_view name) const {
  auto it = pod_index_.find(key2(ns, name));
  return it == pod_index_.end() ? nullptr : &pods[it->second];
}

const Obj<k8s::KubeNode>* Snapshot::node(std::string_view name) const {
  auto it = node_index_.find(std::string(name));
  return it == node_index_.end() ? nullptr : &nodes[it->second];
}

std::span<const size_t> Snapshot::pods_on(std::string_view node) const {
  auto it = pods_by_node_.find(std::string(node));
  if (it == pods_by_node_.end()) return {};
  return it->second;
}

std::vector<const Obj<k8s::Event>*> Snapshot::events_for(std::string_view kind, std::string_view ns,
                                                         std::string_view name) const {
  std::vector<const Obj<k8s::Event>*> out;
  auto it = events_by_object_.find(key3(kind, ns, name));
  if (it == events_by_object_.end()) return out;
  for (size_t i : it->second) out.push_back(&events[i]);
  const auto ts = [](const Obj<k8s::Event>* e) {
    return e->v.last_timestamp.empty() ? e->v.event_time : e->v.last_timestamp;
  };
  std::stable_sort(out.begin(), out.end(), [&](auto* a, auto* b) { return ts(a) < ts(b); });
  return out;
}

std::vector<const ContainerLog*> Snapshot::logs_for(std::string_view ns, std::string_view pod) const {
  std::vector<const ContainerLog*> out;
  auto it = logs_by_pod_.find(key2(ns, pod));
  if (it == logs_by_pod_.end()) return out;
  for (size_t i : it->second) out.push_back(&logs[i]);
  return out;
}

const Obj<k8s::Workload>* Snapshot::workload(std::string_view kind, std::string_view ns, std::string_view name) const {
  auto it = workload_index_.find(key3(kind, ns, name));
  return it == workload_index_.end() ? nullptr : &workloads[it->second];
}

const sched::Cluster& Snapshot::cluster(const std::string& resource) const {
  auto& slot = clusters_[resource];
  if (!slot) slot = std::make_unique<sched::Cluster>(sched::cluster_from_k8s(node_refs_, pod_refs_, resource));
  return *slot;
}

}  // namespace kgpu::doctor
