// The rows of `kgpu top nodes|pods|namespaces`, computed from the cluster (src/top/cluster.h) and
// each node's metrics (views.cc), and their renderings (render.cc: aligned text as kubectl prints,
// or JSON). `kgpu allocations` is top/allocations.h. docs/top.md says what every column means.
//
// Conventions: a reading nobody reported is nullopt, shown "-" and null, never 0. Utilization is
// DCGM_FI_DEV_GPU_UTIL (% of time a kernel ran); GR-ACTIVE and TENSOR are the profiling ratios
// as percentages. "GPU-equivalents" count a whole GPU as 1, a share as k/R (k of its R replicas),
// a MIG instance as its compute slices / 7.
//
// Thread safety: pure functions.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "top/cluster.h"

namespace kgpu::top {

using Metrics = std::map<std::string, NodeSource>;  // by node name

// One GPU or MIG instance on a node, with who holds it.
struct GpuRow {
  std::string node, key, uuid, index, model, mig_profile;
  std::optional<bool> up, healthy;
  std::optional<double> util, gr, tensor, mem_used, mem_total, temp, power;
  std::vector<std::string> holders;  // "<ns>/<pod>[/<container>][ k/R]"
};

struct NodeRow {
  std::string name;
  int gpus = 0;
  std::map<std::string, int> models;  // physical GPUs by model
  struct Resource {
    std::string name;
    int64_t allocatable = 0, requested = 0;
    int replicas = 1;  // per GPU (a shared resource: > 1)
  };
  std::vector<Resource> resources;
  std::optional<double> util, gr, tensor, mem_used, mem_total, temp, power;
  int lost = 0, unhealthy = 0;
  bool cordoned = false;
  std::string error;  // why no metrics
  std::vector<GpuRow> devices;
};

// One device (or share) a container holds.
struct Holding {
  std::string node, device_key, resource, what;
  int replicas = 0, of = 0;  // a share: k of R replicas; 0 for a whole GPU or MIG instance
  double gpu_equiv = 0;
  std::optional<double> util, gr, tensor, mem_used, mem_entitled;
};

struct PodRow {
  std::string ns, pod, container, node;  // container empty: the pod's totals
  std::vector<Holding> holds;
  double gpu_equiv = 0;
  std::optional<double> util, gr, tensor, mem_used, mem_entitled;
  std::string note;  // e.g. the node's agent is unreachable
};

struct NamespaceRow {
  std::string name;
  int pods = 0;
  double gpu_equiv = 0;
  std::map<std::string, int64_t> requested;  // by resource, of non-terminal pods (what quota counts)
  std::map<std::string, double> quota;       // hard, by quota key ("requests.nvidia.com/gpu"), the least
  std::optional<double> util, mem_used;
  // The GPU quota queue its pods go to (docs/queues.md), with the queue's usage: "" when none.
  std::string queue;
  std::vector<std::string> queue_usage;  // "nvidia.com/gpu 16/8, 8 borrowed, 4 pending", per quota
};

std::vector<NodeRow> node_rows(const Cluster& c, const Metrics& m);
// One row per pod, or per container with `containers`.
std::vector<PodRow> pod_rows(const Cluster& c, const Metrics& m, bool containers);
std::vector<NamespaceRow> namespace_rows(const Cluster& c, const Metrics& m);

// Sorting: `key` is one of the values listed in the command's help; numbers descending with
// unknown values last, names ascending. An unknown key is an error naming the choices.
Result<void> sort_nodes(std::vector<NodeRow>& rows, const std::string& key);
Result<void> sort_pods(std::vector<PodRow>& rows, const std::string& key);
Result<void> sort_namespaces(std::vector<NamespaceRow>& rows, const std::string& key);

std::string nodes_table(const std::vector<NodeRow>& rows, bool wide);
std::string pods_table(const std::vector<PodRow>& rows, bool all_namespaces, bool containers, bool wide);
std::string namespaces_table(const std::vector<NamespaceRow>& rows);
nlohmann::json to_json(const std::vector<NodeRow>& rows);
nlohmann::json to_json(const std::vector<PodRow>& rows);
nlohmann::json to_json(const std::vector<NamespaceRow>& rows);

}  // namespace kgpu::top
