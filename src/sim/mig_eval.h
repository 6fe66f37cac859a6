// MIG layouts compared on a cluster trace (`kgpu sim --mig-layouts`, docs/mig.md "Evaluation"):
// the planner (gpu/mig_plan.h) against NVIDIA's fixed all-balanced and all-1g.10gb layouts.
//
// The trace has no MIG GPUs, so its GPU nodes are taken as H100-80GB nodes with the same GPU count,
// and each GPU pod becomes MIG instances: a share of one GPU becomes the smallest profile with at
// least as many compute sevenths (1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, else 7g.80gb); n whole GPUs
// become n x 7g.80gb. Every layout is fixed for the run; the planner's is chosen once per node
// from every request of the trace (its demand mix) among NVIDIA's default names.
//   instant  every pod pending at once (the moment after a layout is chosen), served in trace
//            order, each on the first node whose free instances hold all of it;
//   time     pods arrive at their creation time and leave at their deletion time; one that finds
//            no free instances is not served (counted, never queued).
// Reported per layout: pods served, compute slices used (instant: at the end; time: the mean over
// the trace's span, weighted by time, and the peak), and the planner's time and choices.
//
// Thread safety: plain functions.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "framework/cluster.h"

namespace kgpu::sim {

struct MigLayoutResult {
  std::string layout;  // "planner", "all-balanced", "all-1g.10gb"
  size_t served = 0, pods = 0;
  double slices_used = 0;  // fraction of the cluster's compute slices
  double peak_slices = 0;  // time mode: the most in use at once (instant: = slices_used)
};

struct MigEvaluation {
  size_t nodes = 0, gpus = 0, gpu_pods = 0, instances_asked = 0;
  bool time_mode = false;
  std::vector<MigLayoutResult> layouts;
  double plan_seconds = 0;
  std::map<std::string, size_t> planner_choices;  // config -> nodes
};

// The MIG profiles a trace pod becomes (empty for a pod without GPUs).
std::vector<std::string> mig_instances(const sched::Pod& pod);

struct MigEvalOptions {
  bool time_mode = false;
  double arrival_speedup = 1;  // time mode: creation times divided by this, lifetimes unchanged
  int pod_copies = 1;          // time mode: every trace pod arrives this many times
};

MigEvaluation evaluate_mig_layouts(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                   const MigEvalOptions& options);

}  // namespace kgpu::sim
