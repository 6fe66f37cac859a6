#include "doctor/snapshot.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <iterator>
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

std::string_view str_of(const k8s::Value* n, std::string_view key) {
  const k8s::Value* v = n != nullptr ? n->find(key) : nullptr;
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

bool Snapshot::reads_kind(std::string_view kind) {
  // The kinds index() decodes.
  static constexpr std::string_view kKinds[] = {
      "Pod",           "Node",          "Event",         "Deployment",     "StatefulSet",
      "DaemonSet",     "ReplicaSet",    "Job",           "CronJob",        "ResourceQuota",
      "PriorityClass", "PodDisruptionBudget",            "HorizontalPodAutoscaler",
      "Namespace",     "PrometheusRule", "Service",      "ResourceClaim",  "ResourceClaimTemplate",
      "DeviceClass",   "ResourceSlice", "ServiceMonitor", "PodMonitor",    "ContainerLog",
      "SnapshotInfo"};
  return std::find(std::begin(kKinds), std::end(kKinds), kind) != std::end(kKinds);
}

namespace {

// Identity of a cluster object: API group, kind, namespace, name.
bool same_object(const k8s::Document& a, const k8s::Document& b) {
  return a.kind == b.kind && a.metadata.name == b.metadata.name && a.metadata.namespace_ == b.metadata.namespace_ &&
         a.api_group() == b.api_group();
}

}  // namespace

size_t Snapshot::pod_hash(std::string_view ns, std::string_view name) {
  const std::hash<std::string_view> h;
  const size_t x = h(ns);
  return x ^ (h(name) + 0x9e3779b97f4a7c15ULL + (x << 6) + (x >> 2));
}

namespace {

size_t object_hash(const k8s::Document& d) {
  const std::hash<std::string_view> h;
  size_t x = h(d.kind);
  for (std::string_view part : {d.metadata.namespace_, d.metadata.name, d.api_group()}) {
    x ^= h(part) + 0x9e3779b97f4a7c15ULL + (x << 6) + (x >> 2);
  }
  return x;
}

}  // namespace

Snapshot Snapshot::from(k8s::LoadResult loaded) {
  Snapshot s;
  std::vector<k8s::Document>& docs = loaded.documents;
  // "Now" falls back to the latest creationTimestamp of any object loaded.
  int64_t latest_created = 0;
  // Keep the kinds the rules read; of the same object in several files (a full snapshot plus a
  // fresher `kubectl get nodes`), the last one read. kgpu.io documents (SnapshotInfo, ContainerLog)
  // are not cluster objects: all kept. The table holds indices (4 bytes an object, open
  // addressing), not keys: a snapshot of millions of objects must not be copied into strings.
  std::vector<uint32_t> slots(std::bit_ceil(std::max<size_t>(16, 2 * docs.size())), UINT32_MAX);
  const size_t mask = slots.size() - 1;
  std::vector<uint8_t> keep(docs.size(), 0);
  for (size_t i = 0; i < docs.size(); ++i) {
    const k8s::Document& d = docs[i];
    if (auto t = parse_time(d.metadata.creation_timestamp)) latest_created = std::max(latest_created, *t);
    if (!reads_kind(d.kind)) continue;
    keep[i] = 1;
    if (d.api_group() == "kgpu.io" || d.metadata.name.empty()) continue;
    for (size_t slot = object_hash(d) & mask;; slot = (slot + 1) & mask) {
      if (slots[slot] == UINT32_MAX) {
        slots[slot] = static_cast<uint32_t>(i);
        break;
      }
      if (same_object(docs[slots[slot]], d)) {
        keep[slots[slot]] = 0;  // an earlier copy
        slots[slot] = static_cast<uint32_t>(i);
        break;
      }
    }
  }
  slots = {};
  size_t kept = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    if (keep[i] == 0) continue;
    if (kept != i) docs[kept] = std::move(docs[i]);
    ++kept;
  }
  docs.erase(docs.begin() + static_cast<std::ptrdiff_t>(kept), docs.end());
  docs.shrink_to_fit();
  s.docs_ = std::move(docs);
  s.errors_ = std::move(loaded.errors);
  s.index(latest_created);
  return s;
}

Result<Snapshot> Snapshot::load(const std::vector<std::string>& paths) {
  auto loaded = k8s::load_paths(paths, reads_kind);
  if (!loaded) return std::unexpected(loaded.error());
  return from(std::move(*loaded));
}

void Snapshot::index(int64_t latest_created) {
  int64_t latest = 0;
  const auto seen = [&](std::string_view t) {
    if (auto v = parse_time(t)) latest = std::max(latest, *v);
  };
  const auto invalid = [&](const k8s::Document& d, const std::vector<k8s::Issue>& issues) {
    for (const k8s::Issue& i : issues) {
      if (!i.invalid_quantity) continue;
      invalid_fields.push_back({&d, i.line > 0 ? i.line : d.line, i.message});
      invalid_docs_.insert(&d);
    }
  };
  // Exact capacities: a vector grown by doubling holds up to twice its objects, and three times
  // during its last reallocation (a Pod view is ~0.5 KB).
  {
    size_t n_pods = 0, n_nodes = 0, n_events = 0, n_workloads = 0;
    for (const auto& d : docs_) {
      const std::string_view kind = d.kind;
      if (kind == "Pod") {
        ++n_pods;
      } else if (kind == "Node") {
        ++n_nodes;
      } else if (kind == "Event") {
        ++n_events;
      } else if (kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet") {
        ++n_workloads;
      }
    }
    pods.reserve(n_pods);
    pod_refs_.reserve(n_pods);
    nodes.reserve(n_nodes);
    node_refs_.reserve(n_nodes);
    events.reserve(n_events);
    workloads.reserve(n_workloads);
  }
  for (const auto& d : docs_) {
    const std::string_view kind = d.kind;
    if (kind == "Pod") {
      auto p = k8s::as_pod(d);
      invalid(d, p->issues);
      pods.push_back({&d, std::move(*p)});
    } else if (kind == "Node") {
      auto n = k8s::as_node(d);
      invalid(d, n->issues);
      nodes.push_back({&d, std::move(*n)});
    } else if (kind == "Event") {
      auto e = k8s::as_event(d);
      seen(e->last_timestamp.empty() ? e->event_time : e->last_timestamp);
      events.push_back({&d, std::move(*e)});
    } else if (kind == "Deployment" || kind == "StatefulSet" || kind == "DaemonSet" || kind == "ReplicaSet") {
      if (auto w = k8s::as_workload(d)) {
        invalid(d, w->issues);
        workloads.push_back({&d, std::move(*w)});
      }
    } else if (kind == "Job") {
      auto j = k8s::as_job(d);
      invalid(d, j->issues);
      jobs.push_back({&d, std::move(*j)});
    } else if (kind == "CronJob") {
      auto c = k8s::as_cron_job(d);
      invalid(d, c->issues);
      cron_jobs.push_back({&d, std::move(*c)});
    } else if (kind == "ResourceQuota") {
      auto q = k8s::as_resource_quota(d);
      invalid(d, q->issues);
      quotas.push_back({&d, std::move(*q)});
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
    } else if (kind == "ResourceClaim") {
      claims.push_back({&d, std::move(*k8s::as_resource_claim(d))});
    } else if (kind == "ResourceClaimTemplate") {
      claim_templates.push_back({&d, std::move(*k8s::as_resource_claim_template(d))});
    } else if (kind == "DeviceClass") {
      device_classes.push_back({&d, std::move(*k8s::as_device_class(d))});
    } else if (kind == "ResourceSlice") {
      auto sl = k8s::as_resource_slice(d);
      invalid(d, sl->issues);
      slices.push_back({&d, std::move(*sl)});
    } else if (kind == "ServiceMonitor" || kind == "PodMonitor") {
      monitors.push_back(&d);
    } else if (kind == "ContainerLog") {
      const k8s::Value* prev = d.root->find("previous");
      logs.push_back({&d, d.metadata.namespace_, d.metadata.name, str_of(d.root, "container"),
                      prev != nullptr && prev->as_bool().value_or(false), str_of(d.root, "text")});
    } else if (kind == "SnapshotInfo") {
      collected_at_ = std::string(str_of(d.root, "collectedAt"));
      if (const k8s::Value* errs = d.root->find("errors")) {
        for (const auto& e : errs->items()) collection_errors_.emplace_back(e.text());
      }
    }
  }
  if (auto t = parse_time(collected_at_)) {
    now_ = *t;
  } else {
    now_ = latest != 0 ? latest : latest_created;
  }
  // The pod table holds positions (4 bytes a pod, open addressing, at most half full), not
  // "namespace/name" strings: a snapshot of millions of pods must not be copied into keys. Of two
  // pods with the same namespace and name (only unnamed ones survive from()), the first is found.
  pod_slots_.assign(std::bit_ceil(std::max<size_t>(16, 2 * pods.size())), UINT32_MAX);
  const size_t pod_mask = pod_slots_.size() - 1;
  for (size_t i = 0; i < pods.size(); ++i) {
    for (size_t slot = pod_hash(pods[i].ns(), pods[i].name()) & pod_mask;; slot = (slot + 1) & pod_mask) {
      if (pod_slots_[slot] == UINT32_MAX) {
        pod_slots_[slot] = static_cast<uint32_t>(i);
        break;
      }
      const auto& other = pods[pod_slots_[slot]];
      if (other.ns() == pods[i].ns() && other.name() == pods[i].name()) break;
    }
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

bool Snapshot::has_invalid_fields(const k8s::Document* doc) const {
  return invalid_docs_.contains(doc);
}

const Obj<k8s::Pod>* Snapshot::pod(std::string_view ns, std::string_view name) const {
  if (pod_slots_.empty()) return nullptr;
  const size_t mask = pod_slots_.size() - 1;
  for (size_t slot = pod_hash(ns, name) & mask;; slot = (slot + 1) & mask) {
    if (pod_slots_[slot] == UINT32_MAX) return nullptr;
    const Obj<k8s::Pod>& p = pods[pod_slots_[slot]];
    if (p.ns() == ns && p.name() == name) return &p;
  }
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
