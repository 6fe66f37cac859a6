// What `kgpu top` and `kgpu allocations` read from the Kubernetes API: GPU nodes, GPU pods, DRA
// claims and slices in the read model (k8s/api/objects.h), GPU ResourceQuotas and the kgpu agent
// pods with their metrics port. Then each node's agent /metrics through the API server's pods/proxy.
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
#include "k8s/api/objects.h"
#include "scheduler/queues.h"
#include "top/exposition.h"
#include "top/node_metrics.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::top {

struct QuotaInfo {
  std::string ns, name;
  std::map<std::string, double> hard, used;  // only keys naming an nvidia.com/ resource
};

struct AgentPod {
  std::string ns, name, node, phase, ip;
  int port = 0;  // the container port named "metrics"; 0 when none
  bool ready = false;
};

struct Cluster {
  std::vector<k8s::api::NodeObject> nodes;  // GPU nodes only, by name
  std::vector<k8s::api::PodObject> pods;    // pods with a GPU device request or a claim, not terminal
  std::vector<QuotaInfo> quotas;
  std::vector<k8s::api::ClaimObject> claims;
  std::vector<k8s::api::SliceObject> slices;
  std::vector<AgentPod> agents;
  std::vector<std::string> warnings;  // what could not be read (a kind the server lacks, ...)
  // GPU quota queues (docs/queues.md), when their ConfigMap was read: the config and each queue's
  // usage (admitted, borrowed, pending) from the pods.
  std::optional<scheduler::queues::Config> queues;
  std::map<std::string, scheduler::queues::QueueUsage> queue_usage;

  const k8s::api::NodeObject* node(std::string_view name) const;
};

// Decoders of the API objects only `top` reads (nodes, pods, claims and slices: k8s/api/objects.h).
QuotaInfo decode_quota(const nlohmann::json& quota);
AgentPod decode_agent(const nlohmann::json& pod, std::string_view port_name);

struct ReadOptions {
  std::string node_selector;    // label selector on nodes
  std::string pod_namespace;    // "" = all namespaces
  std::string pod_selector;     // label selector on pods
  std::string agent_namespace;  // "" = all namespaces
  std::string agent_selector = "app.kubernetes.io/name=kgpu-agent";
  std::string agent_port_name = "metrics";
  bool quotas = false;
  bool dra = true;  // claims and slices (absent resource.k8s.io/v1: a warning)
  // The queue ConfigMap "<namespace>/<name>" (key queues.yaml); empty: not read. Absent: no queues.
  std::string queue_config = "kgpu-system/kgpu-scheduler-queues";
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
