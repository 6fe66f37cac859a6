// Trace-driven simulation over the scheduling framework (the same filters and policies a
// scheduler would run).
//
// FGD protocol (Weng et al., ATC'23): pods only arrive, in a seeded random order, resampled from
// the trace until the requested GPU reaches `target_arrived` of cluster capacity; pods that do
// not fit stay unscheduled. Time-driven mode: pods arrive at creation_time and leave at
// deletion_time, freeing their capacity.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "sched/cluster.h"
#include "sched/framework.h"

namespace kgpu::sim {

struct CurvePoint {
  double arrived = 0;    // arrived GPU / capacity
  double allocated = 0;  // allocated GPU / capacity
};

struct RunResult {
  std::string policy;
  uint64_t seed = 0;
  size_t arrivals = 0;
  size_t scheduled = 0;
  double final_arrived = 0, final_allocated = 0;
  double peak_allocated = 0;  // highest allocation ratio seen (the time-driven mode's headline)
  double frag_ratio_at_90 = -1;                     // fragmented / idle GPU milli when arrivals crossed 90%
  std::vector<CurvePoint> curve;                    // one point per whole percent of arrived
  std::map<std::string, int> unscheduled_by_shape;  // "1x0.46 GPU", "2 GPU", "CPU only"
  std::map<std::string, int> unscheduled_by_reason;
  double seconds = 0;
  // FNV-1a over every decision in arrival order: pod name, then the node's name and the GPU
  // indices, or a marker when unscheduled. Equal hashes = identical placements (the check that
  // optimisations of the framework do not move any decision).
  uint64_t placement_hash = 0;
};

struct RunOptions {
  std::string policy = "FGD";
  uint64_t seed = 1;
  double target_arrived = 1.3;
  // kFirst: ties go to the first best node of a per-seed random node order.
  sched::TieBreak tie_break = sched::TieBreak::kRandom;
  // Called every ~1% of arrivals with the fraction done (progress).
  std::function<void(double)> progress;
};

Result<RunResult> run_fgd_protocol(const std::vector<sched::Node>& nodes, const std::vector<sched::Pod>& pods,
                                   const RunOptions& options);
Result<RunResult> run_time_driven(const std::vector<sched::Node>& nodes, const std::vector<sched::Pod>& pods,
                                  const RunOptions& options);

// "1x0.46 GPU" for a share, "2 GPU" for whole GPUs, "CPU only".
std::string shape_name(const sched::Pod& p);

}  // namespace kgpu::sim
