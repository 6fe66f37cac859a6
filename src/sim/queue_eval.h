// Admission compared in time on a cluster trace (`kgpu sim --queue-eval`, docs/queues.md
// "Evaluation"): the same arrivals and departures under three schedulers.
//   pod-by-pod     FGDPack, every pod on its own, kube-scheduler's queue (priority, then arrival;
//                  backoff 1..10 s; a departure retries the parked pods);
//   gangs+queues   FGDPack behind gangs and GPU quota queues: a job is admitted by the queues
//                  (scheduler/queues.h, the rules and code `kgpu scheduler` runs) and then placed
//                  whole or not at all; reclaim evicts borrowing jobs whole, and an evicted job
//                  starts again from the beginning;
//   gangs+queues/never  the same with reclaimWithinCohort: Never (borrowing, no evictions);
//   fifo           MostAllocated pod by pod, kube-scheduler's default packing score, same queue.
// Time: a pod arrives at creation_time / arrival_speedup and runs for its trace lifetime; with
// pod_copies = n every pod arrives n times (copy j is its own pod).
// Jobs: a pod, or in gangs+queues a gang: the GPU pods of one tenant that arrive at the same second
// with the same shape (CPU, memory, GPUs, models) and copy number.
// Tenants, from the trace, deterministically: "qos" (the qos column: LS, BE, Burstable,
// Guaranteed, each its own tenant) or "hash:<n>" (FNV-1a of the pod name, modulo n).
// Queues: one ClusterQueue per tenant in one cohort, quota in milli-GPU (resource gpu-milli),
// nominal = the cluster's GPUs split by each tenant's share of the trace's GPU-seconds; no
// borrowing or lending limit; reclaim Any (Never in gangs+queues/never). CPU-only pods bypass the
// queues.
// Measured per scenario, over jobs: waiting (completion - arrival - run time: queueing delay,
// including time lost to evictions) p50/p99, job completion time p50/p99, slowdown (completion
// time / run time); GPU utilisation (allocated / capacity) over the arrival window, mean, peak and
// 100 samples; per tenant the same, and Jain's index over the tenants' mean slowdowns (1: every
// tenant slowed alike).
//
// Thread safety: plain functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "framework/cluster.h"

namespace kgpu::sim {

struct TenantResult {
  std::string name;
  size_t jobs = 0, completed = 0, evictions = 0;
  int64_t quota = 0;  // nominal quota, milli-GPU (gangs+queues; else 0)
  double wait_p50 = 0, wait_p99 = 0, jct_p50 = 0, jct_p99 = 0;  // seconds, over completed jobs
  double mean_slowdown = 0;
  double gpu_seconds = 0;  // GPU-seconds held, work lost to evictions included
};

struct ScenarioResult {
  std::string name, policy;
  bool gangs = false, queues = false;
  size_t jobs = 0, gang_jobs = 0, completed = 0, never_started = 0, evictions = 0;
  double wait_p50 = 0, wait_p99 = 0, jct_p50 = 0, jct_p99 = 0, mean_slowdown = 0;
  double utilization_mean = 0, utilization_peak = 0;  // over the arrival window
  std::vector<double> utilization;                    // 100 samples over the arrival window
  double lost_gpu_seconds = 0;                        // work evicted jobs had done
  double jain_slowdown = 0;
  std::vector<TenantResult> tenants;
  size_t admission_passes = 0, attempts = 0;
  double seconds = 0;  // wall-clock time of the run
};

struct QueueEvalOptions {
  std::string tenants = "qos";  // "qos" or "hash:<n>"
  double arrival_speedup = 1;
  int pod_copies = 1;
  uint64_t seed = 1;
};

struct QueueEvaluation {
  size_t nodes = 0, gpus = 0, pods = 0, gangs = 0, gang_pods = 0;
  int64_t window_start = 0, window_end = 0;  // the arrival window, seconds
  std::string queues_yaml;                   // the queue config gangs+queues ran with
  std::vector<ScenarioResult> scenarios;
};

// `qos`: the pods' qos column (load_pod_column), needed for tenants "qos", else ignored.
Result<QueueEvaluation> evaluate_queues(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                        const std::vector<std::string>& qos, const QueueEvalOptions& options);

std::string queue_eval_table(const QueueEvaluation& ev);
std::string queue_eval_json(const QueueEvaluation& ev);

}  // namespace kgpu::sim
