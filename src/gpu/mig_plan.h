// The MIG planner (`kgpu mig plan`, docs/mig.md): per node, the config (a name of the config file)
// whose layout serves the MIG requests best, judged in this order:
//   1. the fewest evictions: a GPU whose layout changes loses its running pods (the MIG manager
//      drains a GPU it changes);
//   2. the most pending requests served (requests are handed out node by node, each node taking
//      what its best config serves);
//   3. the least stranded capacity: compute slices of instances neither used nor wanted;
//   4. keeping the node's current config on a tie.
// Every choice carries its explanation, with the runner-up.
//
// The model is per node and per GPU: a GPU's current instances come from the node's current config
// (GPUs it does not name are unknown: any change counts as changing them), and a node's running
// MIG pods are placed on its GPUs' matching instances first-fit.
//
// Thread safety: plain functions.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "gpu/mig_config.h"

namespace kgpu::gpu::mig {

struct PlanNode {
  std::string name;
  std::vector<GpuId> gpus;
  std::vector<Offer> offers;    // what its GPUs offer (one model per node)
  std::string current;          // the config its label names and that was applied ("" = none/unknown)
  std::vector<std::string> running;  // the profiles its running MIG pods hold, one per pod
};

struct NodeChoice {
  std::string node;
  std::string config;  // the choice
  bool change = false;  // differs from the current config
  unsigned evictions = 0, served = 0, stranded_slices = 0;
  std::vector<std::string> served_profiles;  // the pending requests it takes
  std::string why;
};

// `pending`: one profile per pending request. Configs that do not fit a node's GPUs (a profile it
// does not offer, too many instances) are skipped for it.
std::vector<NodeChoice> plan_configs(const ConfigFile& file, const std::vector<PlanNode>& nodes,
                                     std::vector<std::string> pending);

// The profiles a GPU offers, from its total memory as GPU Feature Discovery labels it
// (nvidia.com/gpu.memory, MiB), for planning off the node: the 40 GB class (A100-40GB), the 80 GB
// class (A100-80GB, H100-80GB) and the 141 GB class (H200). Other sizes: empty (not planned).
std::vector<Offer> offers_for_memory(uint64_t gpu_memory_mib);

// The compute slices of a profile name ("3g.40gb" -> 3, "1g.10gb+me" -> 1; 0 if not a profile).
unsigned profile_slices(const std::string& profile);

// The MIG instances a pod asks, one profile per instance, from its containers' (and init
// containers') `nvidia.com/mig-<profile>` limits ("nvidia.com/mig-1g.10gb.me" -> "1g.10gb+me").
std::vector<std::string> mig_requests(const nlohmann::json& pod);

// The cluster's plan as `kgpu mig plan` makes it (docs/mig.md): the MIG nodes are those labelled
// nvidia.com/mig.capable=true or carrying nvidia.com/mig.config; their GPU count and memory class
// from GFD's nvidia.com/gpu.count and nvidia.com/gpu.memory (others are skipped, named); the
// current config is the label's when nvidia.com/mig.config.state is success; running requests
// are those of pods bound to the node, pending those of unbound pods (finished pods count for
// nothing). `file` null: NVIDIA's default names for each memory class.
struct ClusterPlan {
  std::vector<NodeChoice> choices;
  std::vector<std::string> unserved;  // pending requests no choice serves
  std::vector<std::string> skipped;   // "<node> (why)"
};
ClusterPlan plan_cluster(const std::vector<const nlohmann::json*>& nodes, const std::vector<const nlohmann::json*>& pods,
                         const ConfigFile* file);

}  // namespace kgpu::gpu::mig
