// Trace-driven simulation over the scheduling framework (the same filters and policies a
// scheduler would run).
//
// FGD protocol (Weng et al., ATC'23): pods only arrive, in a seeded random order, resampled from
// the trace until the requested GPU reaches `target_arrived` of cluster capacity; pods that do
// not fit stay unscheduled. Time-driven mode: pods arrive at creation_time and run for their
// trace lifetime (deletion_time - creation_time), freeing their capacity when they leave; a pod
// that fits nowhere waits in a pending queue modelled on kube-scheduler's (see run_time_driven),
// or is dropped (Pending::kDrop, the simulator's earlier behaviour).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "framework/cluster.h"
#include "framework/framework.h"

namespace kgpu::sim {

struct CurvePoint {
  double arrived = 0;    // arrived GPU / capacity
  double allocated = 0;  // allocated GPU / capacity
};

// Queueing in time mode, for one class of pods (by GPU request: see gpu_class()). Seconds are
// trace seconds.
struct ClassQueueStats {
  size_t arrived = 0;       // pods of the class that arrived
  size_t placed = 0;        // placed, at once or after waiting
  size_t waited = 0;        // placed after waiting (> 0 s in the queue)
  size_t never_placed = 0;  // still pending when the run ended
  // Queueing delay (placement time - arrival time) of the placed pods, nearest-rank percentiles;
  // 0 when none was placed.
  double delay_p50 = 0, delay_p95 = 0, delay_p99 = 0, delay_max = 0;
  double wait_pod_seconds = 0;  // all time spent pending, placed and never-placed pods
  // Pending time during which the pod's GPU request fitted in the free GPU capacity of the nodes
  // of its allowed models taken together, but on no single one of them (GPU room only: a whole
  // GPU pod needs that many idle GPUs on one node, a share one GPU with that much free).
  double fragmentation_pod_seconds = 0;
};

struct QueueStats {
  bool enabled = false;  // false: a run of the FGD protocol, or time mode with Pending::kDrop
  std::map<int, ClassQueueStats> by_class;  // keyed by gpu_class()
  ClassQueueStats all;
  size_t attempts = 0;      // scheduling attempts: first tries and retries
  size_t peak_pending = 0;  // most pods pending at once
  int64_t end_time = 0;     // trace time the run ended (last event that could change anything)
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
  double seconds = 0;      // wall-clock time of the run (trace loading excluded)
  double cpu_seconds = 0;  // CPU time of the thread that ran it: the cost without a busy machine's waits
  // FNV-1a over every decision in arrival order: pod name, then the node's name and the GPU
  // indices, or a marker when unscheduled. Equal hashes = identical placements (the check that
  // optimisations of the framework do not move any decision).
  // With a pending queue, a pod's decision is hashed when it is placed (pods never placed are
  // hashed as unscheduled at the end, in arrival order), so a run where no pod ever waits hashes
  // as the same run with Pending::kDrop.
  uint64_t placement_hash = 0;
  QueueStats queue;  // time mode only
};

// Time mode: what happens to a pod that fits on no node when it is tried.
enum class Pending {
  // It waits, as in kube-scheduler's scheduling queue: pods are tried by priority (higher first),
  // then arrival (creation time, then trace order). A pod that does not fit is parked as
  // unschedulable with a backoff (1 s after its first failed attempt, doubling per attempt up to
  // 10 s: podInitialBackoff / podMaxBackoff). A departure (capacity freed) moves every parked pod
  // back to be tried (at once if its backoff has passed, else when it does). Nothing else moves
  // them: arrivals only take capacity, so a retry without a departure could not succeed.
  kQueue,
  // It is counted unscheduled and dropped.
  kDrop,
};

struct RunOptions {
  std::string policy = "FGD";
  uint64_t seed = 1;
  double target_arrived = 1.3;
  // kFirst: ties go to the first best node of a per-seed random node order.
  sched::TieBreak tie_break = sched::TieBreak::kRandom;
  // Time mode only.
  Pending pending = Pending::kQueue;
  // Time mode: arrivals `arrival_speedup` times as fast (creation times divided by it, rounded
  // down), lifetimes unchanged: the load on the cluster grows about in proportion. > 0.
  double arrival_speedup = 1;
  // Time mode: every trace pod arrives `pod_copies` times at its arrival time (copy j > 0 is
  // named "<name>#<j>" in reports and the hash; copy 0 is the pod itself), multiplying the load
  // while keeping the trace's arrival pattern and lifetimes. >= 1.
  int pod_copies = 1;
  // Called every ~1% of arrivals with the fraction done (progress).
  std::function<void(double)> progress;
};

// The FGD protocol's input as a run sees it (run_fgd_protocol uses it; replays of the same run
// against the live scheduler reuse it): the nodes in the per-seed order (ties under
// TieBreak::kFirst go to the first in it) and the arrivals, indices into `pods`: the shuffled
// trace, then pods drawn from it with replacement, until the next one would pass
// `target_arrived` of the GPU capacity (that one is not added).
struct FgdArrivals {
  std::vector<sched::NodeState> nodes;
  std::vector<size_t> pods;
  int64_t gpu_capacity = 0;  // milli-GPU
  int64_t arrived = 0;       // milli-GPU requested by the arrivals
};
Result<FgdArrivals> fgd_arrivals(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                 uint64_t seed, double target_arrived);
// The nodes in a per-seed order (ties under TieBreak::kFirst go to the first in it).
std::vector<sched::NodeState> seeded_order(const std::vector<sched::NodeState>& nodes, std::mt19937_64& rng);
// kube-scheduler's backoff for a pod after `attempts` failed attempts: podInitialBackoff (1 s)
// doubled per further attempt, at most podMaxBackoff (10 s).
int64_t backoff_seconds(int attempts);
// Nearest-rank percentile of sorted values; 0 for none.
double percentile(const std::vector<int64_t>& sorted, double q);

// The seed of the random source run_fgd_protocol's policy draws from (Random, TieBreak::kRandom).
uint64_t scheduling_seed(uint64_t seed);

Result<RunResult> run_fgd_protocol(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                   const RunOptions& options);
Result<RunResult> run_time_driven(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                  const RunOptions& options);

// The class of a pod by GPU request, ordered by size: 0 for CPU only, 1 for a share of one GPU,
// 2·n for n whole GPUs. gpu_class_name(): "0", "<1", "1", "2", ... (GPUs).
int gpu_class(const sched::Pod& p);
std::string gpu_class_name(int gpu_class);

// "1x0.46 GPU" for a share, "2 GPU" for whole GPUs, "CPU only".
std::string shape_name(const sched::Pod& p);

}  // namespace kgpu::sim
