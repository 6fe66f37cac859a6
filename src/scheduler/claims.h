// DRA ResourceClaims allocated by `kgpu scheduler` for the pods it places: the rules Kubernetes
// sets for a scheduler other than kube-scheduler (KEP-4381): allocate and reserve a pod's claims
// before the pod is bound.
//
// Model (kept from informers on resourceslices, deviceclasses and resourceclaims):
//   - node-local pools: ResourceSlices with spec.nodeName; of a (driver, pool) only the slices of
//     the highest generation count (a publisher rewriting its pool never mixes old and new);
//   - DeviceClasses: their CEL selectors and opaque config;
//   - ResourceClaims: their requests, config, and status.allocation (devices taken, node).
//
// filter(): the pod's claims (spec.resourceClaims[].resourceClaimName, or for a template the claim
// pod.status.resourceClaimStatuses names; none yet: the pod waits, every node unresolvable with
// the reason) are allocated node by node among the candidates: each request's devices must pass
// the DeviceClass's selectors and the request's (src/cel; an evaluation error aborts that node's
// allocation, as in Kubernetes), not carry a NoSchedule/NoExecute taint the request does not
// tolerate, and not be allocated to another claim (in its status.allocation, or chosen by a filter
// whose bind is pending), and, for a device that consumes shared counters (KEP-4815 partitionable
// devices: dynamic MIG's partitions), fit what the counter sets of its pool leave after the devices
// allocated and chosen so far (a counter the pool does not publish: it does not fit). ExactCount takes `count` devices, All every matching device (all of them
// free); firstAvailable takes the first alternative that can be allocated. An allocated claim
// (shared by several pods) pins the pod to its node. Among the nodes where everything fits the one
// left with the fewest free devices is chosen (packing; ties in name order), and the choice is held
// so the next filter sees those devices taken.
//
// reserve() (bind, before the pod's Binding): per claim, re-read it; when it is not allocated yet
// add the finalizer resource.kubernetes.io/delete-protection (update), then write status.allocation
// {devices.results, devices.config (the class's entries FromClass, the claim's FromClaim),
// nodeSelector for the node, allocationTimestamp} and add the pod to status.reservedFor (update of
// the status subresource); a 409 re-reads and retries. unreserve() undoes what reserve() wrote when
// the Binding then fails.
//
// Not handled (a claim using them is refused on every node with the reason): constraints
// (matchAttribute), adminAccess, capacity requests (KEP-5075), and pools that are not node-local
// (allNodes / nodeSelector slices).
//
// Thread safety: every method may be called from any thread (one lock; reserve()/unreserve() make
// their API calls outside it).
#pragma once

#include <chrono>
#include <compare>
#include <tuple>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cel/cel.h"
#include "common/clock.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::scheduler {

inline constexpr const char* kClaimFinalizer = "resource.kubernetes.io/delete-protection";
inline constexpr size_t kMaxReservedFor = 256;  // ResourceClaimReservedForMaxSize
inline constexpr int kClaimWriteAttempts = 5;   // re-reads after a 409 before giving up

struct DeviceId {
  std::string driver, pool, device;
  auto operator<=>(const DeviceId&) const = default;
  std::string text() const { return driver + "/" + pool + "/" + device; }
};

// One claim of a pod as filter() decided it.
struct ClaimChoice {
  std::string ns, name, uid;
  bool preallocated = false;  // allocated before (shared): reserve() only adds the pod to reservedFor
  std::vector<std::pair<std::string, DeviceId>> results;  // request ("req" or "req/sub") -> device
  nlohmann::json config = nlohmann::json::array();        // status.allocation.devices.config[]
};

struct PodClaimChoice {
  std::string pod;  // "namespace/name"
  std::string node;
  std::vector<ClaimChoice> claims;
  Clock::SteadyTime at{};
};

struct ClaimFilterResult {
  std::optional<std::string> node;                  // chosen
  std::map<std::string, std::string> failed;        // node -> why not (another pod's claim may free up)
  std::map<std::string, std::string> unresolvable;  // node -> why not (preemption cannot help)
  std::string message;                              // for people and the FailedScheduling event
  std::string reason;                               // short: WaitingForResourceClaim, CannotAllocateClaims, ...
};

class ClaimAllocator {
 public:
  // A choice not bound within `ttl` is forgotten (the attempt was aborted).
  ClaimAllocator(Clock& clock, std::chrono::milliseconds ttl);
  ~ClaimAllocator();

  // Informer feed (Kubernetes JSON, resource.k8s.io/v1).
  void upsert_slice(const nlohmann::json& slice);
  void remove_slice(const nlohmann::json& slice);
  void upsert_class(const nlohmann::json& device_class);
  void remove_class(const nlohmann::json& device_class);
  void upsert_claim(const nlohmann::json& claim);
  void remove_claim(const nlohmann::json& claim);
  // The pod is gone: its pending choice too.
  void forget_pod(const std::string& pod_uid);

  // Whether the pod names any ResourceClaim (spec.resourceClaims non-empty).
  static bool has_claims(const nlohmann::json& pod);

  // Chooses a node among `nodes` where all the pod's claims can be allocated (see above) and holds
  // the choice under the pod's uid.
  ClaimFilterResult filter(const nlohmann::json& pod, std::span<const std::string_view> nodes);

  // The held choice for the pod, if any (prioritize, bind, tests).
  std::optional<PodClaimChoice> choice(const std::string& pod_uid) const;

  // Allocates and reserves the chosen claims for the pod on `node` (see above). "" on success, else
  // the error (the choice is dropped; kube-scheduler retries the pod). What was written is
  // recorded for unreserve().
  std::string reserve(kube::Client& client, const std::string& ns, const std::string& pod, const std::string& pod_uid,
                      const std::string& node);
  // Removes the pod from the claims the last reserve() for it wrote and deallocates the claims it
  // allocated that nobody else reserved (finalizer removed too); best effort, errors logged. A
  // claim that was already reserved for the pod before that reserve() is left alone.
  void unreserve(kube::Client& client, const std::string& pod_uid);

  // Counts for tests and metrics.
  size_t pool_count() const;
  size_t claim_count() const;
  size_t class_count() const;

  struct State;

 private:
  std::unique_ptr<State> st_;
};

// The status.allocation a ClaimChoice writes on `node` at `now` (RFC 3339, seconds).
nlohmann::json allocation_json(const ClaimChoice& c, const std::string& node, const std::string& now);

}  // namespace kgpu::scheduler
