// The live cluster as `kgpu report` sees it: GPU nodes and the pods that hold GPUs, with each
// pod's workload (its controller, followed up through ReplicaSet -> Deployment and Job ->
// CronJob), owner (a label) and kind of work (notebook, Job, other).
//
// Read through the API client (one paged list per kind across namespaces) or built from the
// objects' JSON directly (tests, benchmarks), through the read model (k8s/api/objects.h). A GPU
// pod is a pod bound to a node, not finished, whose effective request of a GPU device resource
// (k8s::is_gpu_device_resource) is above 0 — the count `top`, `allocations` and the scheduler use.
//
// Thread safety: plain values.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/error.h"
#include "framework/cluster.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::cost {

enum class WorkKind { kOther, kNotebook, kJob };
const char* work_kind_name(WorkKind k);

struct GpuNode {
  std::string name;
  std::string model;           // nvidia.com/gpu.product (GFD), "" when unlabelled
  int gpus = 0;                // physical GPUs: nvidia.com/gpu.count, else allocatable nvidia.com/gpu
  int replicas = 1;            // nvidia.com/gpu.replicas (time-slicing / MPS), 1 without sharing
  int64_t gpu_memory_mib = 0;  // nvidia.com/gpu.memory
  bool mig = false;            // MIG devices advertised (nvidia.com/mig-* allocatable, or mig.strategy)
  int64_t cpu_milli = 0, memory_mib = 0;
  std::map<std::string, std::string> labels;
  std::vector<sched::Taint> taints;
  bool unschedulable = false;
};

struct GpuPod {
  std::string ns, name, uid, node;
  std::string resource;  // the GPU resource requested
  int64_t units = 0;     // of `resource`: the pod's effective request (k8s/api/objects.h)
  std::string workload;  // "Deployment/trainer", "Job/etl-42", "StatefulSet/db", "Pod/x"
  std::string owner;     // the owner label's value, "" when absent
  WorkKind kind = WorkKind::kOther;
  double started = 0;  // status.startTime (else creationTimestamp), seconds since the epoch
  int64_t cpu_milli = 0, memory_mib = 0;
  std::map<std::string, std::string> node_selector;
  std::vector<sched::Toleration> tolerations;

  bool shared() const;              // a replica of a shared GPU
  std::string mig_profile() const;  // "3g.40gb" for nvidia.com/mig-3g.40gb, else ""
};

struct ClusterView {
  std::vector<GpuNode> nodes;  // nodes with GPUs, by name
  std::vector<GpuPod> pods;    // GPU pods, by namespace then name
  std::vector<std::string> warnings;
  const GpuNode* node(const std::string& name) const;
};

struct ClusterObjects {
  std::vector<nlohmann::json> nodes, pods, replicasets, jobs;
  std::vector<std::string> warnings;  // kinds that could not be listed
};

// Builds the view. `owner_label`: the pod label naming a workload's owner (team, person).
ClusterView cluster_from_objects(const ClusterObjects& objects, const std::string& owner_label);

// Lists nodes, pods, ReplicaSets and Jobs through `client`. A failure to list nodes or pods is an
// error; ReplicaSets or Jobs that cannot be listed (RBAC) leave those workloads named by their
// ReplicaSet or Job, with a warning.
Result<ClusterObjects> read_cluster(kube::Client& client);

}  // namespace kgpu::cost
