// The read model of live API objects: a GPU pod, a GPU node, a ResourceClaim's allocation and a
// ResourceSlice's devices, as small typed values decoded once from the API's JSON (or from a
// manifest's Document) with the rules they must agree with. `kgpu top`, `allocations`, `report`,
// the live scheduler, the agent and the DRA driver all read pods and nodes through this file;
// "how many GPUs does this pod hold" has one answer: PodObject::requests, Kubernetes' effective
// request (k8s::pod_request: the larger of app containers plus sidecars and each init container
// plus the sidecars before it, limits standing in for absent requests, plus overhead).
//
// A PodObject and NodeObject keep their Document: the typed view (`view`: k8s::Pod / KubeNode,
// with taints, tolerations, selectors and affinity as the k8s types) points into its tree, so the
// value stays valid as long as it lives, copies included (the tree is shared and immutable).
//
// Thread safety: pure functions; values are immutable after decoding.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "k8s/document.h"
#include "k8s/gpu_assignment.h"
#include "k8s/objects.h"

namespace kgpu::k8s::api {

// A container and the resources it asks for: its effective request per resource (the request,
// or the limit when there is no request), rounded up to whole units.
struct ContainerResources {
  std::string name;
  bool init = false;     // in initContainers
  bool sidecar = false;  // an init container with restartPolicy Always: it keeps running
  std::vector<std::pair<std::string, int64_t>> requests;  // resource -> whole units
  int64_t request(std::string_view resource) const;       // 0 when absent
};

struct OwnerRef {
  std::string kind, name;
  bool operator==(const OwnerRef&) const = default;
};

struct PodObject {
  Document doc;  // the object; `view` and the k8s types in it point into doc's tree
  Pod view;
  std::string ns, name, uid, node, phase;
  std::string creation;    // metadata.creationTimestamp as written
  std::string start_time;  // status.startTime as written
  std::map<std::string, std::string> labels;
  bool deleting = false;  // metadata.deletionTimestamp set
  bool gated = false;     // spec.schedulingGates not empty
  OwnerRef controller;    // the controller owner reference; empty kind when none
  std::string image;      // of the first app container
  // Init containers, then containers, each list in spec order: the order the kubelet allocates in.
  std::vector<ContainerResources> containers;
  // The pod's effective request of every GPU device resource (k8s::is_gpu_device_resource) it
  // names, in whole units, overhead included; a name it asks 0 of is there with 0.
  std::map<std::string, int64_t> requests;
  int64_t cpu_milli = 0;   // effective cpu request, millicores
  int64_t memory_mib = 0;  // effective memory request, MiB rounded up
  // ResourceClaim names: spec.resourceClaims[].resourceClaimName, then the names generated from
  // templates (status.resourceClaimStatuses[].resourceClaimName), each once.
  std::vector<std::string> claims;
  // The first resource value kube-apiserver would refuse (resource_quantity_error); nullopt when valid.
  std::optional<std::string> invalid;

  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
  // Bound to a node and not finished: its requests count on the node.
  bool holds() const { return !node.empty() && !terminal(); }
  int64_t request(std::string_view resource) const;
  // The GPU device resource the pod asks for (a request above 0): nvidia.com/gpu, else
  // nvidia.com/gpu.shared, else the first other by name; "" when none.
  std::string gpu_resource() const;
  // metadata.annotations[key], or nullopt.
  std::optional<std::string_view> annotation(std::string_view key) const;
};

// Decodes a Pod as the API serves it (kind and apiVersion may be absent). Errors: not an object,
// nested too deep.
Result<PodObject> decode_pod(const nlohmann::json& pod);
// The same from a manifest's or snapshot's Document of kind Pod (`invalid` from its view's
// invalid-quantity issues).
Result<PodObject> pod_object(Document doc);

struct NodeObject {
  Document doc;
  KubeNode view;  // taints, capacity, allocatable, conditions
  std::string name;
  std::map<std::string, std::string> labels;
  bool unschedulable = false;                                    // cordoned
  bool ready = true;                                             // the Ready condition (true when none)
  std::map<std::string, int64_t> capacity, allocatable;  // GPU device resources only
  int64_t cpu_milli = 0, memory_mib = 0;                         // allocatable
  std::optional<NodeGpuReport> report;  // kgpu.io/gpus
  std::string report_error;             // the annotation is there but does not parse

  // A label's integer value (nvidia.com/gpu.count, ...); 0 when absent or not an integer.
  int64_t label_int(std::string_view key) const;
  // A node the GPU views list: it has a GPU device resource, the nvidia.com/gpu.present label, a
  // nonzero nvidia.com/gpu.count label or a kgpu.io/gpus report.
  bool is_gpu_node() const;
};

Result<NodeObject> decode_node(const nlohmann::json& node);

struct ClaimDevice {
  std::string driver, pool, device;
};
// A ResourceClaim's allocation.
struct ClaimObject {
  std::string ns, name;
  std::vector<ClaimDevice> devices;       // status.allocation.devices.results
  std::vector<std::string> reserved_for;  // pod names (status.reservedFor, resource pods)
};
ClaimObject decode_claim(const nlohmann::json& claim);

struct SliceDevice {
  std::string name;
  bool tainted = false;
};
struct SliceObject {
  std::string name, driver, pool, node;
  std::vector<SliceDevice> devices;
};
SliceObject decode_slice(const nlohmann::json& slice);

// The first container resource value kube-apiserver would refuse, as
// "spec.containers[0] (main): resources.limits[nvidia.com/gpu]: <why>" (init containers as
// spec.initContainers[i]); nullopt when every value passes. The rules of Kubernetes'
// ValidateResourceRequirements: each value is a quantity (a string or a JSON number; null,
// "", "abc", "NaN", "+Inf" and magnitudes beyond the parser's range are not) and not negative;
// an extended resource (a name with a domain other than kubernetes.io, e.g. nvidia.com/gpu) is
// whole ("0.5" and "500m" are not), and its request needs a limit equal to it.
std::optional<std::string> resource_quantity_error(const nlohmann::json& pod);

}  // namespace kgpu::k8s::api
