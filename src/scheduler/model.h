// The live scheduler's model of the cluster and its upkeep (GpuScheduler::Impl, scheduler.h says
// what the model holds and trusts): nodes with their agents' reports, pods and their charges, one
// sched::Cluster and Framework per device resource, choices not yet bound. scheduler.cc answers
// the verbs over it; model.cc keeps it.
//
// Internal to kgpu_scheduler. Thread safety: every member is guarded by `mu`, taken by the
// GpuScheduler methods; Impl's own methods expect it held.
#pragma once

#include <initializer_list>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "k8s/api/objects.h"
#include "k8s/gpu_assignment.h"
#include "framework/cluster.h"
#include "framework/fragmentation.h"
#include "framework/framework.h"
#include "scheduler/metrics.h"
#include "scheduler/scheduler.h"

namespace kgpu::scheduler {

namespace detail {
// "a,b,c".
std::string gpu_list(const std::vector<std::string>& v);
}  // namespace detail

struct GpuScheduler::Impl {
  struct NodeInfo {
    sched::NodeState base;
    std::optional<k8s::NodeGpuReport> report;
    std::set<std::string> reported_uids;  // pods the report lists on some GPU
    std::string report_error;
    std::string structure;  // what the pools are built from, as text (a change: rebuild)
  };

  // One GPU a charge holds: the uuid and the replicas of it (1 for a whole GPU).
  struct Hold {
    std::string uuid;
    int replicas = 1;
  };

  struct PodInfo {
    std::string uid, ns, name, node;
    bool holds = false;     // bound, not finished: its requests count on the node
    bool deleting = false;  // deletionTimestamp set
    bool gated = false;     // schedulingGates
    std::string resource;   // the GPU resource requested ("" none)
    int64_t units = 0;
    int64_t cpu_milli = 0, memory_mib = 0;
    std::vector<std::string> assigned;  // kgpu.io/gpu-assignment (all containers), when for `resource`
    std::vector<ContainerRequest> containers;
    bool allocated = false;  // kgpu.io/gpu-allocated present
    Clock::SystemTime bound_at{};
  };

  // A choice of ours not yet seen bound by the informer.
  struct Assumed {
    std::string pod;  // "namespace/name", for messages
    std::string node, resource;
    std::vector<std::string> uuids;
    int64_t units = 0, cpu_milli = 0, memory_mib = 0;
    std::vector<ContainerRequest> containers;
    Clock::SteadyTime at{};
    bool bound = false;  // the binding was written: kept until the informer shows the pod
    Clock::SystemTime bound_at{};
    // A gang reservation (reserve_gang): kept until `deadline` instead of `assume_ttl`.
    std::string gang;
    Clock::SteadyTime deadline{};
  };

  // What one charge took from one pool, so it can be given back exactly.
  struct Applied {
    size_t pool = 0;
    sched::Pod pod;
    sched::Placement placement;
  };

  struct Pool {
    std::string resource;
    int replicas = 1;  // shared pool: replicas per GPU (the most common among the nodes)
    std::unique_ptr<sched::Cluster> cluster;
    std::unordered_map<std::string, size_t> node_index;
    std::vector<std::vector<std::string>> uuids;  // per pool node, the GPUs in gpu_free order
    std::unordered_map<std::string, std::pair<size_t, int>> gpu_at;
    std::optional<sched::Framework> framework;
    std::vector<sched::TaskShape> workload;
    // The last filter's candidate names and what they resolved to: kube-scheduler sends the same
    // feasible nodes call after call, and comparing the list is much cheaper than looking up
    // thousands of names. Valid for this pool's node_index (a rebuilt pool starts empty).
    std::vector<std::string> last_candidates;
    std::vector<char> last_allowed;     // per pool node
    std::vector<size_t> last_unknown;   // positions in last_candidates not in node_index
  };

  SchedulerOptions opt;
  Clock& clock;
  kube::Client* client;
  kube::EventRecorder* events;

  mutable std::mutex mu;
  std::map<std::string, NodeInfo> nodes;          // by name (cluster order)
  std::unordered_map<std::string, PodInfo> pods;  // by uid
  std::unordered_map<std::string, std::unordered_set<std::string>> pods_on_node;
  std::unordered_map<std::string, Assumed> assumed;                       // by uid
  std::unordered_map<std::string, std::vector<Applied>> applied;          // by charge key
  std::unordered_map<std::string, std::vector<std::string>> report_keys;  // node -> its "report/" charge keys
  std::vector<Pool> pools;
  bool dirty = true;
  Clock::SteadyTime workload_at{};
  std::mt19937_64 rng;
  std::unordered_map<std::string, std::string> pending_reason;  // uid -> last filter outcome reason
  SchedulerStats st;
  Metrics metrics;
  ClaimAllocator claims{clock, opt.assume_ttl};  // its own lock; never called with `mu` held
  const std::vector<std::unique_ptr<sched::FilterPlugin>> filters = sched::default_filters();  // explain, preempt

  Impl(SchedulerOptions o, kube::Client* c, kube::EventRecorder* e)
      : opt(std::move(o)), clock(*opt.clock), client(c), events(e), rng(opt.seed) {}

  // ---- model input -------------------------------------------------------------------------------

  // The model's record of a pod from the read model (k8s/api/objects.h). `spec`, when given,
  // receives the pod as the scheduler's framework sees it (selectors, affinity, tolerations,
  // requests) for its GPU resource, from the same decoding; nullopt if it has none.
  static PodInfo pod_info(const k8s::api::PodObject& pod, std::optional<sched::Pod>* spec = nullptr);

  static std::string structure_of(const NodeInfo& n);

  // ---- pools -------------------------------------------------------------------------------------

  void rebuild();

  void refresh_workload();

  // Total variation distance between two workloads (shapes matched on their requests).
  static double workload_distance(const std::vector<sched::TaskShape>& a, const std::vector<sched::TaskShape>& b);

  // The scheduler's pod for a request of `units` of the pool's resource.
  static sched::Pod sched_pod(const Pool& pool, int64_t units, int64_t cpu, int64_t mem);

  // What a charge holds now: the GPUs (from the report, the assignment, or our choice) and
  // whether they are known; nullopt when the key holds nothing.
  struct Want {
    std::string node, resource;
    int64_t units = 0, cpu_milli = 0, memory_mib = 0;
    std::vector<Hold> holds;
    bool known = true;  // false: place a placeholder by the default choice
  };

  // Adds what the node's report says `uid` holds; whether it lists the pod at all.
  bool reported(const std::string& node, const std::string& uid, std::vector<Hold>* holds) const;

  // A share's replicas spread evenly over its GPUs (one GPU, or R each when k is a multiple of R).
  static void hold_all(int64_t units, const std::vector<std::string>& uuids, std::vector<Hold>* out);

  std::optional<Want> want(const std::string& uid) const;

  void release(const std::string& key);

  void apply(const std::string& key, const Want& w);

  void charge(const std::string& uid);

  // Report entries for pods the informer does not know (yet, or any more).
  void charge_unknown_reported(const std::string& node);

  // A pod the node's report lists changed between known and unknown: its report charge follows.
  void recharge_report_of(const std::string& node, const std::string& uid);

  void maybe_refresh();

  // ---- decisions ---------------------------------------------------------------------------------

  Pool* pool_for(const std::string& resource);

  // The pod (pod_info's `spec`) as `pool` schedules it: its request in the pool's replicas.
  static std::optional<sched::Pod> pod_for_pool(std::optional<sched::Pod> p, const Pool& pool, int64_t units);

  // NVLink: among the node's idle GPUs, the set of `n` with the most NVLink pairs, starting from
  // the framework's choice (all idle GPUs are alike for fragmentation).
  std::vector<int> nvlink_choice(const Pool& pool, size_t node, std::vector<int> chosen) const;
  // The framework's placement of `pod` (pod_for_pool of `info`) undone in the pool and kept as a
  // choice instead: GPUs NVLink-first for whole GPUs, the pod's facts, at now. Not stored.
  Assumed choose(const PodInfo& info, const sched::Pod& pod, Pool& pool, const sched::Placement& placement);

  static bool preemption_may_help(sched::FitCode c);

  std::string gpu_detail(const Pool& pool, const sched::NodeState& n, const sched::Pod& pod) const;

  // Why `pod` fits none of the `allowed` nodes of `pool`, node by node in kube-scheduler's words
  // plus the GPU detail, into d.result.failed / unresolvable and d.message (out of `candidates`
  // nodes kube-scheduler passed, those outside the pool already in unresolvable). Returns the
  // most frequent reason ("" when there is none).
  std::string explain(const Pool& pool, const sched::Pod& pod, const std::vector<char>& allowed, size_t candidates,
                      FilterDecision& d) const;
};

}  // namespace kgpu::scheduler
