// The live GPU scheduler behind `kgpu scheduler`: a model of the cluster's GPUs kept from the API
// (nodes with their agents' GPU reports, pods with their assignments) and the extender verbs.
//
// Model. One pool per device resource, `nvidia.com/gpu` and `nvidia.com/gpu.shared`. A pool's
// GPUs are split into its replica count R (time-slicing or MPS replicas; 1 for whole GPUs): a pod
// asking k units takes k/R of one GPU, or k/R whole GPUs when k is a multiple of R. R is the most
// common replica count among the pool's GPUs; GPUs with another count are left out of it. A
// node's GPUs come from its agent's report (annotation kgpu.io/gpus): only healthy GPUs
// advertised under the pool's resource belong to the pool; a node without a report has no GPUs
// kgpu can assign. What a pod holds (its charge) comes from, in order:
//   1. the agent's report, when it lists the pod (what the container really got);
//   2. the pod's kgpu.io/gpu-assignment (bound by kgpu, not admitted yet);
//   3. a pending choice of ours (filter chose, bind not done; expires after `assume_ttl`);
//   4. for a pod bound by someone else that the report does not list yet: the GPUs the default
//      choice would take (so the count is right; the report corrects the place).
// Report entries for pods the informer does not know hold their GPUs until the report drops them.
// CPU and memory of every bound, unfinished pod are charged too (FGD's fit test reads them).
//
// Decisions. filter() chooses node and GPUs among the nodes kube-scheduler passed, with the
// configured policy, charges them at once (so the next pod sees them taken), and returns that
// one node. bind() writes the Binding with the assignment annotations; a lost race (409), a pod
// already bound, or a node still admitting an indistinguishable pod (see `serialize_admission`)
// gives an error and drops the charge: kube-scheduler retries, a GPU is never given twice.
//
// DRA. A pod that names ResourceClaims (spec.resourceClaims) is placed by its claims alone
// (scheduler/claims.h): filter() chooses the node where they can be allocated, bind() allocates
// and reserves them, then writes the Binding (and undoes the reservation when the Binding fails).
// A pod asking for both claims and a GPU extended resource is refused with the reason.
//
// Thread safety: every public method may be called from any thread (one lock; the API calls of
// bind() and the events are made outside it).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "k8s/api/objects.h"
#include "k8s/gpu_assignment.h"
#include "framework/framework.h"
#include "scheduler/claims.h"
#include "scheduler/extender.h"

namespace kgpu::kube {
class Client;
class EventRecorder;
}  // namespace kgpu::kube

namespace kgpu::scheduler {

inline constexpr const char* kWholeResource = "nvidia.com/gpu";
inline constexpr const char* kSharedResource = "nvidia.com/gpu.shared";

struct SchedulerOptions {
  std::string policy = "FGDPack";  // any sched::policy_registry() name
  uint64_t seed = 1;
  sched::TieBreak tie_break = sched::TieBreak::kFirst;
  // A filter choice not followed by a bind within this long is forgotten (the attempt was aborted).
  std::chrono::milliseconds assume_ttl{60'000};
  // Bind refuses a pod while another kgpu pod on the node with an equal per-container request of
  // the same resource is bound but not yet allocated by the agent (younger than admission_wait),
  // so the agent can never confuse the two. Off for replays without kubelets.
  bool serialize_admission = true;
  std::chrono::milliseconds admission_wait{30'000};
  // How often the target workload (FGD's task shapes, from the live GPU pods) is recomputed.
  std::chrono::milliseconds workload_refresh{60'000};
  Clock* clock = &Clock::real();
};

// What filter() decided.
struct FilterDecision {
  FilterResult result;
  std::optional<std::string> node;
  std::vector<std::string> gpus;  // uuids on `node`
  std::string message;            // the outcome for people ("0/3 nodes are available: ...")
};

struct PreemptDecision {
  std::map<std::string, Victims> kept;
};

// What reserve_gang() decided for a gang.
struct GangPlan {
  bool reserved = false;
  std::map<std::string, std::string> nodes;  // member uid -> planned node (GPU members)
  std::string reason;                        // not reserved: why ("member 3 of 8 (ns/p-3): ...")
  bool never = false;  // not reserved and it would not fit the whole cluster empty either
  // Reserved within one NVLink domain (the nodes' nvidia.com/gpu.clique), "" when none: a gang of
  // several members is planned in the domain with the most free GPUs where it fits whole, else on
  // any nodes.
  std::string domain;
};

struct SchedulerStats {
  uint64_t filters = 0, scheduled = 0, unschedulable = 0, errors = 0, binds = 0, bind_errors = 0, preempts = 0;
  uint64_t rebuilds = 0;
};

class GpuScheduler {
 public:
  // `client` and `events` (not owned; may be null in tests that do not bind) must outlive this.
  static Result<std::unique_ptr<GpuScheduler>> create(SchedulerOptions options, kube::Client* client,
                                                      kube::EventRecorder* events);
  ~GpuScheduler();

  // Informer feed (any thread). Objects are Kubernetes JSON.
  void upsert_node(const nlohmann::json& node);
  void remove_node(const std::string& name);
  void upsert_pod(const nlohmann::json& pod);
  void remove_pod(const nlohmann::json& pod);
  // The DRA model (feed it the resourceslices, deviceclasses and resourceclaims informers).
  ClaimAllocator& claims();
  // Replaces everything (a relist).
  void reset(const std::vector<nlohmann::json>& nodes, const std::vector<nlohmann::json>& pods);

  // The extender verbs.
  FilterDecision filter(const ExtenderArgs& args);
  std::vector<std::pair<std::string, int64_t>> prioritize(const ExtenderArgs& args);
  // "" on success, else the error for ExtenderBindingResult.Error.
  std::string bind(const BindingArgs& args);
  PreemptDecision preempt(const PreemptionArgs& args);

  // Gangs (scheduler/gang.h, docs/gangs.md). Plans every GPU member of a gang at once with the
  // policy on the model as it is (largest requests first), and holds the whole plan until
  // `deadline` (members bound by then stay charged as bound pods); nothing is held when one member
  // does not fit. A member with a reservation is filtered to its planned node and bound to its
  // planned GPUs; a gang member without one fits nowhere ("waits for its gang").
  GangPlan reserve_gang(const std::string& gang, const std::vector<nlohmann::json>& members,
                        Clock::SteadyTime deadline);
  // Drops the reservations of the gang's members not bound yet; returns how many.
  size_t release_gang(const std::string& gang);

  // Prometheus text: kgpu_scheduler_* families (docs/scheduler.md).
  std::string metrics_text();
  SchedulerStats stats() const;
  // The GPUs (uuids) charged on `node` per pod uid, for tests and `kgpu` tools.
  std::map<std::string, std::vector<std::string>> charges_on(const std::string& node) const;
  // Cluster-wide allocation of a pool: allocated and capacity in milli-GPU.
  std::pair<int64_t, int64_t> allocation(const std::string& resource) const;

  struct Impl;

 private:
  explicit GpuScheduler(std::unique_ptr<Impl> impl);
  std::string bind_claims(const BindingArgs& args, const PodClaimChoice& choice);
  std::unique_ptr<Impl> impl_;
};

// The pod's containers that request `resource`, in the order the kubelet allocates them (init
// containers, then containers), with their requests; init containers that are not sidecars run
// before the others and may reuse their GPUs.
struct ContainerRequest {
  std::string name;
  int64_t units = 0;
  bool init = false;  // a non-sidecar init container
};
std::vector<ContainerRequest> container_requests(const k8s::api::PodObject& pod, const std::string& resource);

// Splits a pod's GPUs over its containers: init containers take the first of the pod's GPUs they
// need (they finish before the others start); the other containers take consecutive slices. For
// a share of one GPU every container gets it; a share of several whole GPUs (k a multiple of the
// replica count R, a kgpu extension) is split like whole GPUs with `units` counted in GPUs.
k8s::Assignment split_assignment(const std::vector<ContainerRequest>& containers, const std::vector<std::string>& gpus,
                                 bool share);

}  // namespace kgpu::scheduler
