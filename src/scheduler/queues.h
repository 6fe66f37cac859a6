// GPU quota queues (docs/queues.md): Kueue's vocabulary, kgpu's placement. Pure model shared by the
// scheduler's queue admission (scheduler/queue_admission.h), `kgpu top namespaces` and the sim.
//
// Config (`queues.yaml`, in the ConfigMap kgpu-queues or a file; errors "<source>:<line>: <field>: ..."):
//   version: v1
//   clusterQueues:
//     - name: team-a                 # DNS label, unique
//       cohort: research             # optional: queues of one cohort lend and borrow
//       namespaces: [team-a]         # the namespaces whose pods it admits (or via localQueues)
//       weight: 1                    # fair-share weight (> 0), default 1
//       quotas:
//         - resource: nvidia.com/gpu # a GPU resource; units as the pods request them
//           model: ""                # optional nvidia.com/gpu.product of the pod's nodeSelector
//           nominalQuota: 8          # >= 0
//           borrowingLimit: 8        # optional (absent: no limit but the cohort's)
//           lendingLimit: 4          # optional (absent: all of the unused nominal quota)
//       reclaimWithinCohort: Any     # Any | LowerPriority | Never (default Any)
//   localQueues:                     # Kueue's LocalQueue: label kueue.x-k8s.io/queue-name=<name>
//     - {namespace: team-a, name: default, clusterQueue: team-a}
// A queue named twice, a cohort that is also a queue's name, a negative quota, a local queue naming
// a queue that does not exist: refused whole, naming the line and field (the last good config stays).
//
// Workloads: one pod, or a gang (scheduler/gang.h) as one workload of all its members. Usage of a
// queue = the workloads it admitted that have not finished. A workload fits queue q when, for each
// of its (resource, model) requests r:
//   usage_q(r) + request(r) <= nominal_q(r) + min(borrowingLimit_q(r), lendable(r) of the cohort)
// where the cohort lends what each other queue of it leaves unused of its nominal quota, at most its
// lendingLimit, and the cohort's queues together use at most their nominal quotas together.
// Admission order: the pending workload of the queue with the lowest weighted dominant
// share (DRF: max over resources of usage/nominal, divided by the weight) first; within a queue,
// priority (higher first), then creation. A queue's head that does not fit while the queue is
// within its nominal quota reclaims: admitted workloads of queues of its cohort that borrow are
// chosen as victims, lowest priority first, newest first, whole (a gang is evicted whole or not at
// all), just enough for the head to fit.
//
// Thread safety: plain values and functions.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/error.h"

namespace kgpu::scheduler::queues {

inline constexpr const char* kQueueLabel = "kueue.x-k8s.io/queue-name";
inline constexpr const char* kQueueGate = "kgpu.io/queue";

enum class Reclaim { kAny, kLowerPriority, kNever };

struct Quota {
  std::string resource, model;
  int64_t nominal = 0;
  std::optional<int64_t> borrowing_limit, lending_limit;
};

struct ClusterQueue {
  std::string name, cohort;
  std::vector<std::string> namespaces;
  double weight = 1;
  std::vector<Quota> quotas;
  Reclaim reclaim = Reclaim::kAny;
  int line = 0;
};

struct LocalQueue {
  std::string ns, name, cluster_queue;
};

struct Config {
  std::vector<ClusterQueue> queues;
  std::vector<LocalQueue> local_queues;
  const ClusterQueue* find(const std::string& name) const;
};

Result<Config> parse_config(std::string_view text, const std::string& source);

// A (resource, model) key and an amount.
using Key = std::pair<std::string, std::string>;
using Amounts = std::map<Key, int64_t>;
// The amount of `k` in `m` (0 when absent).
inline int64_t amount_of(const Amounts& m, const Key& k) {
  const auto it = m.find(k);
  return it == m.end() ? 0 : it->second;
}

struct Workload {
  std::string id;  // pod uid, or "gang:<ns>/<name>"
  std::string name;  // for people: "ns/pod" or "gang ns/name"
  std::string queue;  // the ClusterQueue
  int32_t priority = 0;
  std::string created;  // RFC 3339 (sorts as text), or any monotonic key
  Amounts request;
  bool admitted = false;
};

// The ClusterQueue of a pod in `ns` with queue label `local_queue` ("" none): a LocalQueue of the
// namespace with that name, else the queue listing the namespace; "" when none.
std::string queue_for(const Config& c, const std::string& ns, const std::string& local_queue);

struct QueueUsage {
  Amounts used, borrowed, pending;
  size_t admitted = 0, waiting = 0;
};
// Usage of every queue from the workloads (admitted count; the others are pending).
std::map<std::string, QueueUsage> usage(const Config& c, const std::vector<Workload>& workloads);

struct Decision {
  std::vector<std::string> admit;                        // workload ids, in order
  std::map<std::string, std::vector<std::string>> evict;  // workload id -> the victims reclaimed for it
  std::map<std::string, std::string> waiting;            // workload id -> why
};

// One admission pass over all workloads (admitted and pending): which pending ones to admit now,
// and which admitted ones to evict so that a queue within its nominal quota gets it back. A
// workload whose victims are chosen is not admitted in this pass (the victims have to leave first).
Decision admit(const Config& c, const std::vector<Workload>& workloads);

struct State;

// admit() kept between passes: the workloads are added, admitted and removed one by one, and each
// pass decides as admit() over them would (the sim's event loop runs one after every change).
// `c` must outlive it. Not thread-safe.
class Admission {
 public:
  explicit Admission(const Config& c);
  ~Admission();
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  void add(Workload w);  // replaces the workload of the same id
  void remove(const std::string& id);
  // The pending workload `id` is admitted now (its usage counts); false when unknown or admitted.
  bool set_admitted(const std::string& id);
  // One pass, as admit(). reasons = false leaves Decision::waiting empty, and skips without a
  // check a pending workload that asks at least as much as one of its queue that failed earlier in
  // the pass (same decisions, faster with many waiting).
  Decision pass(bool reasons = true) const;

 private:
  struct Before {
    bool operator()(const Workload* a, const Workload* b) const;
  };
  std::optional<size_t> index_of(const std::string& queue) const;

  const Config& c_;
  std::map<std::string, std::unique_ptr<Workload>> all_;
  std::vector<std::set<const Workload*, Before>> pending_;  // per queue of c_, in admission order
  std::set<const Workload*> admitted_, unknown_;            // unknown_: pending, of no queue of c_
  mutable std::shared_ptr<const State> used_;               // usage of admitted_, rebuilt when null
};

// The workloads of `pods` (Kubernetes JSON) under `c`: one per pod of a queue, one per gang
// (scheduler/gang.h) of all its members; finished pods left out. A workload is admitted when none
// of its pods still carries kQueueGate. Requests: the containers' limits (else requests) of the
// resources the queues have quotas for, under the model the pod's nodeSelector names
// (nvidia.com/gpu.product). `members`, when given, receives each workload's pods.
// What workloads_of reads of one pod, kept by PodFactsCache between rounds.
struct PodFacts {
  std::string resource_version;
  std::string ns, name, uid, created, gang_key;  // gang_key "" when not in a gang
  std::string queue;                              // its ClusterQueue (queue_for), "" when none
  int32_t priority = 0;
  Amounts request;
  bool finished = false, queue_gated = false;
};
// Per-pod facts by uid, valid while the pod's resourceVersion and the config stay the same: a round
// over 15,000 pods reads again only those that changed. Not thread-safe; one per caller.
class PodFactsCache {
 public:
  const PodFacts& get(const Config& c, const nlohmann::json& pod);
  void clear() { facts_.clear(); }                // the config changed
  void keep_only(const std::set<std::string>& uids);  // forget pods no longer listed
 private:
  std::map<std::string, PodFacts> facts_;
};

std::vector<Workload> workloads_of(const Config& c, const std::vector<const nlohmann::json*>& pods,
                                   std::map<std::string, std::vector<const nlohmann::json*>>* members = nullptr,
                                   PodFactsCache* cache = nullptr);

}  // namespace kgpu::scheduler::queues
