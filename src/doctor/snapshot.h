// A cluster snapshot for `kgpu doctor`: Kubernetes objects as `kubectl get -o json` writes them,
// plus container logs, decoded once and indexed for the rules.
//
// Format (docs/doctor.md): any files src/k8s loads (a kubectl List, objects, YAML), usually the
// one file `kgpu doctor --collect` writes: a `List` whose items are the cluster's objects, one
// `kgpu.io/v1 SnapshotInfo` (collectedAt, kubectlVersion, context, errors) and one
// `kgpu.io/v1 ContainerLog` per collected log (metadata.namespace/name = the pod; container,
// previous, text).
//
// An object in several input files (same API group, kind, namespace and name) is kept once, from
// the last file read; SnapshotInfo and ContainerLog items are all kept. Objects of kinds the rules
// do not read (ConfigMaps, Secrets, CRDs...) are dropped on load: their Documents would be most of
// the memory of a large snapshot.
//
// "Now" for ages is SnapshotInfo.collectedAt, else the latest event timestamp, else the latest
// creationTimestamp in the snapshot.
//
// Ownership: a Snapshot owns its documents; every view and pointer it hands out points into it and
// is valid while it lives. It is movable, not copyable, and immutable after load except for the
// scheduler clusters cluster() builds on first use: one thread at a time.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/error.h"
#include "k8s/document.h"
#include "k8s/objects.h"
#include "framework/k8s_adapter.h"

namespace kgpu::doctor {

template <typename T>
struct Obj {
  const k8s::Document* doc = nullptr;
  T v;
  std::string_view ns() const { return doc->metadata.namespace_; }
  std::string_view name() const { return doc->metadata.name; }
};

// A field the API server would reject (an invalid quantity): the object cannot be as written, so
// the rules do not diagnose it.
struct InvalidField {
  const k8s::Document* doc = nullptr;
  int line = 0;
  std::string message;  // names the field: ".status.allocatable.nvidia.com/gpu: invalid quantity 'NaN': ..."
};

struct ContainerLog {
  const k8s::Document* doc = nullptr;
  std::string_view ns, pod, container;
  bool previous = false;
  std::string_view text;
};

// RFC 3339 ("2026-10-20T08:15:00Z", fractions and offsets accepted) to Unix seconds.
std::optional<int64_t> parse_time(std::string_view rfc3339);

class Snapshot {
 public:
  // Decodes loaded documents (load errors are kept in errors()).
  static Snapshot from(k8s::LoadResult loaded);
  // The kinds the rules read: the k8s::KindFilter to load with (from() drops the others anyway).
  static bool reads_kind(std::string_view kind);
  // Files and directories as k8s::load_paths reads them, with reads_kind.
  static Result<Snapshot> load(const std::vector<std::string>& paths);

  Snapshot(Snapshot&&) = default;
  Snapshot& operator=(Snapshot&&) = default;
  Snapshot(const Snapshot&) = delete;
  Snapshot& operator=(const Snapshot&) = delete;

  int64_t now() const { return now_; }
  std::string_view collected_at() const { return collected_at_; }
  const std::vector<k8s::LoadError>& errors() const { return errors_; }
  std::vector<std::string>& collection_errors() { return collection_errors_; }
  const std::vector<std::string>& collection_errors() const { return collection_errors_; }

  std::vector<Obj<k8s::KubeNode>> nodes;
  std::vector<Obj<k8s::Pod>> pods;
  std::vector<Obj<k8s::Event>> events;
  std::vector<Obj<k8s::Workload>> workloads;  // Deployment, StatefulSet, DaemonSet, ReplicaSet (doc->kind says which)
  std::vector<Obj<k8s::Job>> jobs;
  std::vector<Obj<k8s::CronJob>> cron_jobs;
  std::vector<Obj<k8s::ResourceQuota>> quotas;
  std::vector<Obj<k8s::PriorityClass>> priority_classes;
  std::vector<Obj<k8s::PodDisruptionBudget>> pdbs;
  std::vector<Obj<k8s::HorizontalPodAutoscaler>> hpas;
  std::vector<Obj<k8s::Namespace>> namespaces;
  std::vector<Obj<k8s::PrometheusRule>> prometheus_rules;
  std::vector<Obj<k8s::Service>> services;
  std::vector<Obj<k8s::ResourceClaim>> claims;
  std::vector<Obj<k8s::ResourceClaimTemplate>> claim_templates;
  std::vector<Obj<k8s::DeviceClass>> device_classes;
  std::vector<Obj<k8s::ResourceSlice>> slices;
  std::vector<const k8s::Document*> monitors;  // ServiceMonitor, PodMonitor (raw)
  std::vector<ContainerLog> logs;
  std::vector<InvalidField> invalid_fields;  // in document order

  // Whether `doc` has an entry in invalid_fields.
  bool has_invalid_fields(const k8s::Document* doc) const;

  // Indexes (positions in the vectors above).
  const Obj<k8s::Pod>* pod(std::string_view ns, std::string_view name) const;
  const Obj<k8s::KubeNode>* node(std::string_view name) const;
  std::span<const size_t> pods_on(std::string_view node) const;
  // Events about an object, oldest first (by last timestamp).
  std::vector<const Obj<k8s::Event>*> events_for(std::string_view kind, std::string_view ns,
                                                 std::string_view name) const;
  std::vector<const ContainerLog*> logs_for(std::string_view ns, std::string_view pod) const;
  const Obj<k8s::Workload>* workload(std::string_view kind, std::string_view ns, std::string_view name) const;

  // The scheduler's view for one device resource, built on first use.
  const sched::Cluster& cluster(const std::string& resource) const;
  std::span<const sched::K8sNodeRef> node_refs() const { return node_refs_; }

 private:
  Snapshot() = default;
  void index(int64_t latest_created);

  std::vector<k8s::Document> docs_;
  std::vector<k8s::LoadError> errors_;
  std::vector<std::string> collection_errors_;
  std::string collected_at_;
  int64_t now_ = 0;
  static size_t pod_hash(std::string_view ns, std::string_view name);

  // Positions in `pods` by namespace and name (open addressing; UINT32_MAX = empty).
  std::vector<uint32_t> pod_slots_;
  std::unordered_map<std::string, size_t> node_index_, workload_index_;
  std::unordered_map<std::string, std::vector<size_t>> pods_by_node_, events_by_object_, logs_by_pod_;
  std::vector<sched::K8sNodeRef> node_refs_;
  std::vector<sched::K8sPodRef> pod_refs_;
  std::unordered_set<const k8s::Document*> invalid_docs_;
  mutable std::map<std::string, std::unique_ptr<sched::Cluster>> clusters_;
};

}  // namespace kgpu::doctor
