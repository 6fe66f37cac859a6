// Gangs: pods placed all or nothing (docs/gangs.md). What makes a pod a gang member, read from
// what users already write, in this order of precedence (the first present wins; two that name
// different groups are an error naming the pod and both fields):
//   1. Kubernetes' own PodGroup (1.36, scheduling.k8s.io/v1alpha2): spec.schedulingGroup.podGroupName;
//      minimum: the PodGroup's spec.schedulingPolicy.gang.minCount.
//   2. Kueue's plain-pod groups: label kueue.x-k8s.io/pod-group-name; minimum: the annotation
//      kueue.x-k8s.io/pod-group-total-count (Kueue admits the whole group: the total is the minimum).
//   3. scheduler-plugins' Coscheduling: label scheduling.x-k8s.io/pod-group; minimum: the PodGroup
//      (scheduling.x-k8s.io/v1alpha1) spec.minMember.
//   4. Volcano: annotation scheduling.k8s.io/group-name; minimum: the PodGroup
//      (scheduling.volcano.sh/v1beta1) spec.minMember.
//   5. KAI: annotation (or label) pod-group-name; minimum: the PodGroup (scheduling.run.ai/v2alpha2)
//      spec.minMember.
// kgpu's annotation kgpu.io/gang-min-count, when present, gives the minimum without a PodGroup
// object (and wins over the object's).
//
// The key of a gang is "<namespace>/<group name>": pods of one namespace only.
//
// Thread safety: plain functions.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "apiclient/client.h"
#include "common/error.h"

namespace kgpu::kube {
class EventRecorder;
}  // namespace kgpu::kube

namespace kgpu::scheduler {

// The scheduling gate kgpu's admission holds a gang member behind (added by the chart's
// MutatingAdmissionPolicy, or written in the pod template).
inline constexpr const char* kGangGate = "kgpu.io/gang";
inline constexpr const char* kGangMinCountAnnotation = "kgpu.io/gang-min-count";
// Written on a member that was not gated when its reservation is made: the update makes
// kube-scheduler try the pod again at once.
inline constexpr const char* kGangReservationAnnotation = "kgpu.io/gang-reservation";

struct GangRef {
  std::string key;     // "<namespace>/<group>"
  std::string ns, group;
  std::string source;  // "scheduling.k8s.io", "kueue", "coscheduling", "volcano", "kai"
  std::optional<int64_t> min_count;  // from the pod itself (Kueue's total count, kgpu.io/gang-min-count)
  // The PodGroup object to read the minimum from when the pod does not give it (empty resource
  // name: none, e.g. Kueue).
  kube::Resource podgroup;
};

// The pod's gang, nullopt when it is not a gang member; an error (kInvalidArgument) names the pod
// and the fields when its markers disagree or a count is not a positive integer.
Result<std::optional<GangRef>> gang_of(const nlohmann::json& pod);

// The minimum from a PodGroup object of `ref.podgroup`'s kind; an error names the object and field.
Result<int64_t> podgroup_min_count(const GangRef& ref, const nlohmann::json& podgroup);

// Whether the pod carries the scheduling gate `gate` (default: kgpu's gang gate).
bool has_gang_gate(const nlohmann::json& pod, const char* gate = kGangGate);

// A Scheduling Event about the pod (Warning or Normal); nothing when `events` is null.
void pod_event(kube::EventRecorder* events, const nlohmann::json& pod, bool warning, const std::string& reason,
               const std::string& note);

// Whether the pod is done with (Succeeded, Failed, or being deleted): it counts for no gang or queue.
bool pod_finished(const nlohmann::json& pod);

// Evicts the pod through the Eviction API (its uid as precondition); a pod already gone is a success.
kube::ApiResult<nlohmann::json> evict_pod(kube::Client& client, const nlohmann::json& pod);

// Removes scheduling gate `gate` from the pod (a JSON patch that fails when the gates changed
// since `pod` was read; other gates stay).
kube::ApiResult<nlohmann::json> remove_scheduling_gate(kube::Client& client, const nlohmann::json& pod, const char* gate);
// remove_scheduling_gate for each of `pods`, at most `parallel` requests at once (the client runs
// requests concurrently); the results in the order of `pods`. Blocks until all are answered.
std::vector<kube::ApiResult<nlohmann::json>> remove_scheduling_gates(kube::Client& client,
                                                                      const std::vector<const nlohmann::json*>& pods,
                                                                      const char* gate, size_t parallel);

}  // namespace kgpu::scheduler
