// What `kgpu top` and `kgpu allocations` read from the Kubernetes API, decoded into plain values:
// GPU nodes (GPU resources, cordon, readiness, the agent's kgpu.io/gpus report), GPU pods and
// their effective requests, GPU ResourceQuotas, DRA claims and slices, and the kgpu agent pods
// with their metrics port. Then each node's agent /metrics through the API server's pods/proxy.
//
// Thread safety: the decoders are pure; fetch_node_metrics() runs requests on its own threads
// through `client` (which is thread-safe) and returns when all are done.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "k8s/gpu_assignment.h"
#include "top/exposition.h"
#include "top/node_metrics.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::top {

struct NodeInfo {
  std::string name;
  std::map<std::string, std::string> labels;
  bool unschedulable = false;                            // cordoned
  bool ready = true;                                     // the Ready condition (true when the node has none)
  std::map<std::string, int64_t> capacity, allocatable;  // GPU device resources only
  std::optional<k8s::NodeGpuReport> report;              // kgpu.io/gpus
  std::string report_error;                              // the annotation is there but does not parse
};

struct PodInfo {
  std::string ns, name, uid, node, phase;
  std::map<std::string, std::string> labels;
  std::vector<k8s::ContainerResources> containers;
  // The pod's effective request per GPU device resource, as the scheduler and kubelet count it:
  // max(sum over app containers and sidecars, each init container plus the sidecars before it).
  std::map<std::string, int64_t> requests;
  std::vector<std::string> claims;  // ResourceClaim names (status.resourceClaimStatuses)
  bool terminal() const { return phase == "Succeeded" || phase == "Failed"; }
};

struct QuotaInfo {
  std::string ns, name;
  std::map<std::string, double> hard, used;  // only keys naming an nvidia.com/ resource
};

struct ClaimDevice {
  std::string driver, pool, device;
};
struct ClaimInfo {
  std::string ns, name;
  std::vector<ClaimDevice> devices;       // status.allocation.devices.results
  std::vector<std::string> reserved_for;  // pod names (status.reservedFor, resource pods)
};

struct SliceDevice {
  std::string name;
  bool tainted = false;
};
struct SliceInfo {
  std::string name, driver, pool, node;
  std::vector<SliceDevice> devices;
};

struct AgentPod {
  std::string ns, name, node, phase, ip;
  int port = 0;  // the container port named "metrics"; 0 when none
  bool ready = false;
};

struct Cluster {
  std::vector<NodeInfo> nodes;  // GPU nodes only, by name
  std::vector<PodInfo> pods;    // pods with a GPU device request or a claim, not terminal
  std::vector<QuotaInfo> quotas;
  std::vector<ClaimInfo> claims;
  std::vector<SliceInfo> slices;
  std::vector<AgentPod> agents;
  std::vector<std::string> warnings;  // what could not be read (a kind the server lacks, ...)

  const NodeInfo* node(std::string_view name) const;
};

// Decoders of API objects (as served).
NodeInfo decode_node(const nlohmann::json& node);
PodInfo decode_pod(const nlohmann::json& pod);
QuotaInfo decode_quota(const nlohmann::json& quota);
ClaimInfo decode_claim(const nlohmann::json& claim);
SliceInfo decode_slice(const nlohmann::json& slice);
AgentPod decode_agent(const nlohmann::json& pod, std::string_view port_name);

// A node the GPU views list: it has a GPU device resource, the nvidia.com/gpu.present label, a
// nonzero nvidia.com/gpu.count label or a kgpu.io/gpus report.
bool is_gpu_node(const NodeInfo& n);

struct ReadOptions {
  std::string node_selector;    // label selector on nodes
  std::string pod_namespace;    // "" = all namespaces
  std::string pod_selector;     // label selector on pods
  std::string agent_namespace;  // "" = all namespaces
  std::string agent_selector = "app.kubernetes.io/name=kgpu-agent";
  std::string agent_port_name = "metrics";
  bool quotas = false;
  bool dra = true;  // claims and slices (absent resource.k8s.io/v1: a warning)
};

// Lists what the views need. Nodes and pods must be readable; the other kinds are warnings when
// the server does not have them or refuses them.
Result<Cluster> read_cluster(kube::Client& client, const ReadOptions& options);

struct NodeSource {
  std::optional<NodeMetrics> metrics;
  std::string agent;  // "<ns>/<pod>"
  std::string error;  // why there are no metrics: no agent pod, not running, unreachable, bad page
};

struct FetchOptions {
  int concurrency = 16;
  ParseLimits limits;
};

// Reads each named node's agent /metrics through
// GET /api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics, `concurrency` at a time; a node
// without a running agent, or whose agent does not answer, gets its error and the others are read.
std::map<std::string, NodeSource> fetch_node_metrics(kube::Client& client, const Cluster& cluster,
                                                     const std::vector<std::string>& nodes,
                                                     const FetchOptions& options);

}  // namespace kgpu::top
