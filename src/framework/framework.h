// A scheduling framework in the style of the Kubernetes scheduler framework: filter plugins
// decide whether a node fits (with a reason when not), one score plugin per policy rates each
// feasible node and chooses the GPUs on it, scores are normalized to 0..100, the best node wins
// (ties broken at random, as kube-scheduler does), and reserve/unreserve keep state in step.
//
// Outcomes ("0/1213 nodes: 900 insufficient GPU share, 313 GPU model mismatch") are values,
// separate from errors. One explicit registry names every policy.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "framework/cluster.h"
#include "framework/fragmentation.h"

namespace kgpu::sched {

// Why a node does not take a pod, as a value that callers (`kgpu doctor`) branch on instead of
// parsing text; message() is kube-scheduler's wording for it, what Outcome::reasons counts.
enum class FitCode : uint8_t {
  kFits,
  kNodeAffinity,      // nodeSelector or required node affinity: "node(s) didn't match Pod's node affinity/selector"
  kUnschedulable,     // cordoned, not tolerated: "node(s) were unschedulable"
  kUntoleratedTaint,  // "node(s) had untolerated taint {<key>: <value>}"
  kGpuModel,          // none of the pod's GPU models: "GPU model mismatch"
  kInsufficient,      // too little of `resource` free: "Insufficient <resource>"
  kGpuShare,          // no GPU with the pod's share free: "insufficient GPU share"
  kNoGpuPlacement,    // passed the filters, the score plugin found no GPUs: "no placement on the node's GPUs"
};

struct FitStatus {
  FitCode code = FitCode::kFits;
  const char* plugin = "";    // the plugin that decided (static storage); "" when it fits
  const char* resource = "";  // kInsufficient: "cpu", "memory" or "nvidia.com/gpu" (static storage)
  int taint = -1;             // kUntoleratedTaint: index into the node's taints

  bool fits() const { return code == FitCode::kFits; }
  // kube-scheduler's text; `node` is the node this status was computed for (for the taint).
  std::string message(const NodeState& node) const;
  bool operator==(const FitStatus&) const = default;
};

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual const char* name() const = 0;
  // FitStatus{} (kFits) if the pod fits the node, else why not, with `plugin` = name().
  virtual FitStatus filter(const Pod& pod, const NodeState& node) const = 0;
};

// The Filter phase for one node: the filters in order, the first that rejects decides (as
// kube-scheduler's RunFilterPlugins). The one filter loop: scheduling and explain_fit use it.
FitStatus run_filters(std::span<const std::unique_ptr<FilterPlugin>> filters, const Pod& pod, const NodeState& node);

struct NodeScore {
  double score = 0;       // higher is better; any scale (normalized afterwards)
  std::vector<int> gpus;  // the GPUs this placement would take
};

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual const char* name() const = 0;
  // Called once per pod before scoring (PreScore).
  virtual void prepare(const Pod&, const Cluster&) {}
  // Scores a feasible node; nullopt if the plugin finds no placement there after all.
  virtual std::optional<NodeScore> score(const Pod& pod, const NodeState& node, std::mt19937_64& rng) = 0;
  // True when score() is a pure function of the pod's shape (CPU, memory, GPU count and share)
  // and the node's state, never draws from `rng`, and prepare() does nothing: the framework may
  // then keep scores per pod shape and refresh only the nodes a placement changed.
  virtual bool pure() const { return false; }
};

// Told of every placement the framework makes (after the cluster state took it) and of every
// placement undone (before the cluster state gives it back).
class ReservePlugin {
 public:
  virtual ~ReservePlugin() = default;
  virtual void reserve(const Pod&, const Placement&, const Cluster&) {}
  virtual void unreserve(const Pod&, const Placement&, const Cluster&) {}
};

struct Outcome {
  std::optional<Placement> placement;
  size_t nodes = 0;
  size_t feasible = 0;                 // nodes that passed every filter
  std::map<std::string, int> reasons;  // why nodes were filtered out, by FitStatus::message()
  // "0/1213 nodes are available: 900 insufficient GPU share, 313 GPU model mismatch."
  std::string message() const;
};

enum class TieBreak {
  kRandom,  // uniformly among the best nodes (kube-scheduler's selectHost)
  kFirst,   // the first best node in cluster order
};

struct SchedulingContext {
  std::vector<TaskShape> workload;  // for fragmentation-aware policies
  TieBreak tie_break = TieBreak::kRandom;
};

// Cost of a decision. With TieBreak::kFirst and a pure() score plugin the framework keeps, per
// pod shape (requests, GPU models, node selector, tolerations, node affinity), every node's filter outcome and
// score in a max-tree over cluster order, valid for one Cluster (its id()): a decision refreshes
// only the nodes changed since that shape was last scheduled (Cluster::changes_since), and a
// shape's first decision scores each distinct node state once (states are interned to ids once
// per node change, shared by all shapes). With default_filters() a changed node is re-checked
// from Cluster::room (resources only) and scored only when it passes (docs/scheduling.md). The
// result (placement, feasible count, reasons) is exactly the full scan's: the first node in
// cluster order with the highest score. Other combinations (random tie-break, the Random policy,
// a pod whose node affinity reads node names through match_fields) scan every node as before.
// Memory: about 8.5 bytes per node per cached shape (12.5 with filters of one's own; at most 512
// shapes, least recently used evicted) and 56 bytes per node besides.
class Framework {
 public:
  Framework(std::vector<std::unique_ptr<FilterPlugin>> filters, std::unique_ptr<ScorePlugin> score,
            TieBreak tie_break = TieBreak::kRandom);
  ~Framework();
  Framework(Framework&&) noexcept;
  Framework& operator=(Framework&&) noexcept;
  // Chooses a placement for `pod` and applies it to `cluster` (Reserve); Outcome says why not.
  // `allowed` (indexed like the cluster's nodes): only nodes with a non-zero entry are
  // candidates; the others are left out of the outcome (nodes, feasible, reasons) entirely.
  Outcome schedule(const Pod& pod, Cluster& cluster, std::mt19937_64& rng, const std::vector<char>* allowed = nullptr);
  // false: always scan every node (the reference the incremental path is tested against).
  void set_incremental(bool on) { incremental_ = on; }
  // Undoes a placement (Unreserve): the pod left, or a later stage rejected it.
  void unreserve(const Pod& pod, const Placement& placement, Cluster& cluster);
  void add_reserve_plugin(std::unique_ptr<ReservePlugin> plugin) { reserve_.push_back(std::move(plugin)); }
  const ScorePlugin& score_plugin() const { return *score_; }

 private:
  std::vector<std::unique_ptr<FilterPlugin>> filters_;
  std::unique_ptr<ScorePlugin> score_;
  TieBreak tie_break_;
  std::vector<std::unique_ptr<ReservePlugin>> reserve_;
  std::vector<size_t> feasible_;
  std::vector<NodeScore> scores_;
  bool incremental_ = true;
  bool default_filters_ = false;  // filters_ are default_filters(): the refresh re-checks resources only
  struct Index;  // the per-shape score trees (framework.cc)
  std::unique_ptr<Index> index_;
  Outcome schedule_indexed(const Pod& pod, Cluster& cluster, std::mt19937_64& rng);
};

// The default filters, in order: NodeAffinity (required node affinity), NodeSelector,
// NodeUnschedulable (Node::unschedulable unless Pod::tolerates_unschedulable()), TaintToleration,
// NodeResourcesFit (GPU model, CPU, memory, GPU count/share).
std::vector<std::unique_ptr<FilterPlugin>> default_filters();

// Every node through run_filters, without scoring or reserving anything: per node the status,
// and the Outcome (feasible count, reasons by message) a scheduling attempt would report when
// the score plugin places on every feasible node.
struct FitReport {
  Outcome outcome;
  std::vector<FitStatus> status;  // per node of the cluster
};
FitReport explain_fit(const Pod& pod, const Cluster& cluster, std::span<const std::unique_ptr<FilterPlugin>> filters);
// explain_fit with default_filters().
FitReport explain_fit(const Pod& pod, const Cluster& cluster);

using PolicyFactory = std::function<std::unique_ptr<ScorePlugin>(const SchedulingContext&)>;
// Every policy: LeastAllocated, MostAllocated, Random, DotProduct, GpuClustering, GpuPacking,
// BestFit, FGD, FGDPack (ours). Names are case-sensitive.
const std::map<std::string, PolicyFactory>& policy_registry();
Result<Framework> make_framework(const std::string& policy, const SchedulingContext& ctx);

}  // namespace kgpu::sched
