// The scheduler's model of a cluster: nodes with per-GPU free capacity in milli-GPU (so
// time-sliced/MPS shares and whole GPUs live in one model) and pod requests with Kubernetes
// semantics for selectors, taints and tolerations.
//
// Thread safety: none; one scheduling loop owns a Cluster.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kgpu::sched {

inline constexpr int kMilli = 1000;  // one whole GPU

struct Taint {
  std::string key, value, effect;  // effect: NoSchedule, PreferNoSchedule, NoExecute
};

struct Toleration {
  std::string key, op = "Equal", value, effect;  // op: Equal | Exists; empty key + Exists tolerates all
  // k8s::toleration_tolerates (k8s/predicates.h): one rule for the scheduler, lint and doctor.
  bool tolerates(const Taint& t) const;
};

// Required node affinity (requiredDuringSchedulingIgnoredDuringExecution): a node matches a term
// when every requirement holds (match_expressions on its labels, match_fields on metadata.name
// only); a term without requirements matches no node; terms are ORed.
struct NodeSelectorRequirement {
  std::string key, op;  // In | NotIn | Exists | DoesNotExist | Gt | Lt
  std::vector<std::string> values;
};

struct NodeSelectorTerm {
  std::vector<NodeSelectorRequirement> match_expressions, match_fields;
};

struct NodeState {
  std::string name;
  int64_t cpu_milli = 0, memory_mib = 0;
  std::string gpu_model;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  bool unschedulable = false;  // spec.unschedulable (cordoned): the NodeUnschedulable filter
  // State.
  std::vector<int> gpu_free;  // milli-GPU free per GPU (kMilli = idle)
  int64_t cpu_free = 0, memory_free = 0;
  std::map<std::string, int> gpu_pods_by_tag;  // "share-gpu", "1-gpu", "2-gpu"... -> GPU pods here
  int pods = 0;
  uint64_t version = 0;  // process-wide unique per state: changes with every change (caches keyed on it)

  int gpus() const { return static_cast<int>(gpu_free.size()); }
  int64_t gpu_free_total() const;
  int full_free_gpus() const;
  int max_gpu_free() const;
};

struct Pod {
  std::string name;
  int64_t cpu_milli = 0, memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;                    // share of each GPU; kMilli for whole GPUs
  std::vector<std::string> gpu_models;  // allowed models; empty = any
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  std::vector<NodeSelectorTerm> required_affinity;  // empty: no requirement
  int priority = 0;
  int64_t creation = 0;
  std::optional<int64_t> deletion;

  bool sharing() const { return num_gpu == 1 && gpu_milli < kMilli; }
  // GpuClustering's class of a GPU pod: "share-gpu" or "<n>-gpu"; "" for CPU-only pods.
  std::string gpu_tag() const;
  // Total GPU milli requested (one share, or num_gpu whole GPUs).
  int64_t gpu_request() const { return num_gpu == 1 ? gpu_milli : static_cast<int64_t>(num_gpu) * kMilli; }
  // Whether one of the pod's tolerations tolerates `t`.
  bool tolerates(const Taint& t) const;
  // Whether a cordoned node takes the pod: it tolerates node.kubernetes.io/unschedulable:NoSchedule.
  bool tolerates_unschedulable() const;
  // Whether the required node affinity holds for `node` (true when there is none).
  bool affinity_matches(const NodeState& node) const;
  // Whether the required node affinity reads node names (match_fields).
  bool affinity_reads_node_name() const;
};

// What placements change of a node, packed (40 bytes) for scans over many nodes: the resources
// NodeResourcesFit checks after the GPU model, and the node's version. Cluster keeps one per
// node in step with NodeState (Cluster::room).
struct NodeRoom {
  int64_t cpu_free = 0, memory_free = 0;
  uint64_t version = 0;  // NodeState::version
  int32_t gpus = 0;
  int32_t max_gpu_free = 0;    // largest free share of one GPU (milli)
  int32_t full_free_gpus = 0;  // idle GPUs

  static NodeRoom of(const NodeState& n);
};

// Where a pod goes: the node and the GPUs on it (indices into Node::gpu_free).
struct Placement {
  size_t node = 0;
  std::vector<int> gpus;
};

class Cluster {
 public:
  explicit Cluster(std::vector<NodeState> nodes);
  // Copies get an identity of their own (id()), so caches of one copy never serve another.

  const std::vector<NodeState>& nodes() const { return nodes_; }
  const NodeState& node(size_t i) const { return nodes_[i]; }
  // NodeRoom::of(node(i)), kept in step by assign/release.
  const NodeRoom& room(size_t i) const { return rooms_[i]; }
  int64_t gpu_capacity() const { return gpu_capacity_; }  // milli
  int64_t gpu_allocated() const { return gpu_allocated_; }

  // Applies / reverts a placement. The caller has checked that it fits.
  void assign(const Pod& pod, const Placement& p);
  void release(const Pod& pod, const Placement& p);

  // Process-wide unique identity of this object (new for every copy), for caches keyed on it.
  uint64_t id() const { return id_.value; }
  // Change log: every assign/release appends the node index it changed. change_seq() is the
  // sequence number the next change will get; changes_since(seq) lists the nodes changed since
  // (with repeats), or nullopt when that part of the log was trimmed (the log keeps at least the
  // last max(65536, 8 x nodes) changes). The span is valid until the next assign/release.
  uint64_t change_seq() const { return log_base_ + log_.size(); }
  std::optional<std::span<const uint32_t>> changes_since(uint64_t seq) const;

 private:
  struct Identity {
    uint64_t value;
    Identity();
    Identity(const Identity&);
    Identity& operator=(const Identity&);
  };
  void record(size_t node);

  std::vector<NodeState> nodes_;
  std::vector<NodeRoom> rooms_;  // per node
  int64_t gpu_capacity_ = 0, gpu_allocated_ = 0;
  std::vector<uint32_t> log_;
  uint64_t log_base_ = 0;  // sequence number of log_[0]
  Identity id_;
};

// The GPUs a pod would take on a node by default: for a share, the fitting GPU with the least
// free capacity (tightest fit); for whole GPUs, the first idle ones. nullopt if it does not fit.
std::optional<std::vector<int>> default_gpus(const Pod& pod, const NodeState& node);

}  // namespace kgpu::sched
