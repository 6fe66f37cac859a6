// `kgpu report`: what the cluster's GPUs cost and where they are wasted, from the live cluster
// (ClusterView) and its usage history (Usage):
//
// - allocated but idle: GPU pods whose mean activity over the window is below the idle threshold,
//   with the GPU-hours they held idle (idle samples x step x the pod's share of a GPU) and their
//   cost, rolled up by namespace, workload and owner;
// - right-sizing: pods on whole GPUs (or MIG instances) whose peak memory, with headroom, and mean
//   activity fit a smaller MIG profile of their GPU model (src/gpu/mig's shapes with the model's
//   instance sizes) or, where the model has no MIG, a 1/N time-sliced share;
// - stale holders: notebooks and Job pods whose last activity is longer ago than `idle_after`
//   (or never in the window);
// - fragmentation today and after re-placing today's GPU pods with FGD (the `kgpu sim` policy and
//   framework): idle whole GPUs, fully idle nodes and the FGD paper's fragmentation ratio.
//
// Shares of a GPU: a whole GPU is 1; a MIG instance max(compute slices / 7, memory slices / 8);
// a time-sliced or MPS replica 1 / nvidia.com/gpu.replicas of its node.
//
// Thread safety: plain functions over immutable inputs.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "report/cluster.h"
#include "report/prices.h"
#include "report/usage.h"
#include "framework/cluster.h"

namespace kgpu::cost {

struct ReportOptions {
  double idle_after_s = 24 * 3600;  // stale holders: no activity for this long
  double headroom = 0.2;            // right-sizing: peak memory and activity x (1 + headroom) must fit
  int max_rows = 50;                // rows per table in text and HTML (JSON has all)
  std::string prometheus_url;       // shown in the report
};

struct IdlePod {
  std::string ns, pod, workload, owner, node, model, resource;
  WorkKind kind = WorkKind::kOther;
  double gpus = 0;        // GPUs held, in whole-GPU shares
  double mean_util = 0;   // %
  double held_hours = 0;  // hours the devices were seen held (per device, not x gpus)
  double idle_gpu_hours = 0;
  double cost = 0;  // of the idle GPU-hours
};

struct Rollup {
  std::string key;
  int pods = 0;
  double gpus = 0;
  double held_gpu_hours = 0, idle_gpu_hours = 0;
  double idle_cost = 0;
};

struct RightSize {
  std::string ns, pod, workload, owner, node, model;
  std::string current;             // "1 GPU (80 GiB)", "MIG 3g.40gb"
  std::string suggestion;          // "MIG 1g.10gb", "1/4 of a time-sliced GPU"
  std::string suggested_resource;  // "nvidia.com/mig-1g.10gb", "nvidia.com/gpu.shared"
  double peak_mib = 0, capacity_mib = 0, suggested_mib = 0;
  double mean_util = 0;
  double gpus = 0, suggested_gpus = 0;
  double held_hours = 0;
  double saving_gpu_hours = 0, saving = 0;
};

struct StaleHolder {
  std::string ns, pod, workload, owner, node, model;
  WorkKind kind = WorkKind::kOther;
  double gpus = 0;
  double started = 0;      // seconds since the epoch
  double last_active = 0;  // 0: never active in the window
  double idle_hours = 0;   // since last activity (or since the window start / the pod's start)
  double cost_since_active = 0;
};

struct Fragmentation {
  int nodes = 0, gpus = 0;
  int nodes_modelled = 0;  // MIG-partitioned nodes are left out of the model
  double gpus_allocated = 0;
  int pods = 0;
  // Today (placements from the metrics where a pod's GPUs are known, else the default choice).
  int idle_gpus = 0, idle_nodes = 0, partial_gpus = 0;
  double frag_ratio = 0, fragmented_gpus = 0;
  // The same pods placed by FGD in start order on the empty cluster.
  int fgd_idle_gpus = 0, fgd_idle_nodes = 0, fgd_partial_gpus = 0;
  double fgd_frag_ratio = 0, fgd_fragmented_gpus = 0;
  int fgd_unplaced = 0;
  double freed_gpu_hours_per_day = 0, freed_cost_per_day = 0;  // fgd_idle_gpus - idle_gpus, x 24 h
};

struct Report {
  double generated_at = 0, since = 0, until = 0, step_s = 0, idle_threshold = 0;
  std::string currency, prometheus_url;
  int gpu_pods = 0, pods_with_metrics = 0;
  double held_gpu_hours = 0, idle_gpu_hours = 0, idle_cost = 0, held_cost = 0;
  std::vector<IdlePod> idle;  // by idle GPU-hours, largest first
  std::vector<Rollup> by_namespace, by_workload, by_owner;
  std::vector<RightSize> right_size;  // by saving, largest first
  std::vector<StaleHolder> stale;     // by idle hours, largest first
  Fragmentation fragmentation;
  std::vector<std::string> warnings;
  int max_rows = 50;
};

// The live cluster as `kgpu sim`'s model: GPU nodes without MIG (GPUs all free, CPU and memory
// allocatable), and their GPU pods in start order, each tied to its node's GPU model (a share of a
// time-sliced GPU is 1000 / replicas milli-GPU); pod_node[i] indexes pods[i]'s node. Pod names are
// "namespace/name".
struct SimInput {
  std::vector<sched::NodeState> nodes;
  std::vector<sched::Pod> pods;
  std::vector<size_t> pod_node;
};
SimInput sim_input(const ClusterView& cluster);
// The same as the openb CSV files `kgpu sim --nodes N.csv --pods P.csv` reads (creation times in
// seconds from the first pod's start).
struct SimCsv {
  std::string nodes, pods;
};
SimCsv to_sim_csv(const SimInput& in);

Report build_report(const ClusterView& cluster, const Usage& usage, const Prices& prices, const ReportOptions& options);

std::string to_text(const Report& r);
nlohmann::json to_json(const Report& r);
// A self-contained page: inline CSS and SVG, no scripts, fonts or other requests.
std::string to_html(const Report& r);

// "7d", "36h", "90m", "30s", "1w", "1h30m" -> seconds; an error names the text.
Result<double> parse_duration(std::string_view text);

// The MIG instance sizes of a GPU model: profile name, resource suffix, shape key, memory (MiB),
// compute and memory slices; empty when the model has no MIG (by name and total memory).
struct MigProfileSize {
  std::string name;  // "1g.10gb"
  double memory_mib = 0;
  unsigned compute_slices = 0, memory_slices = 0;
  double share() const;  // max(compute/7, memory/8)
};
std::vector<MigProfileSize> mig_profiles_for(const std::string& model, double memory_mib);

}  // namespace kgpu::cost
