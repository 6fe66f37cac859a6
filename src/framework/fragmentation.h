// GPU fragmentation as the FGD paper (Weng et al., USENIX ATC'23) defines it.
//
// For a node n and a target task shape m: if m is CPU-only or does not fit the node (CPU,
// memory, GPU model, or no GPU can host it), all of the node's idle GPU capacity counts as
// fragmented for m; otherwise only the GPUs whose free share is smaller than m's per-GPU request
// do. F_n = sum over m of p_m * frag_n(m), p_m being the shape's popularity in the workload.
#pragma once

#include <cstdint>
#include <vector>

#include "framework/cluster.h"

namespace kgpu::sched {

struct TaskShape {
  int64_t cpu_milli = 0, memory_mib = 0;
  int num_gpu = 0;
  int gpu_milli = 0;  // per GPU
  std::vector<std::string> gpu_models;
  double popularity = 0;  // p_m, summing to 1 over the workload
};

// The target workload: the most popular shapes of a pod list, covering `coverage` of the pods,
// with popularities renormalized to 1.
std::vector<TaskShape> target_workload(const std::vector<Pod>& pods, double coverage = 0.95);

// frag_n(m) in milli-GPU.
double fragmentation(const NodeState& node, const TaskShape& m);
// F_n in milli-GPU. `allowed` (optional, from allowed_shapes for the node's model) saves the
// per-shape GPU-model checks.
double fragmentation(const NodeState& node, const std::vector<TaskShape>& workload,
                     const std::vector<char>* allowed = nullptr);
// F_n if `pod` were placed on `gpus` of `node`.
double fragmentation_after(const NodeState& node, const Pod& pod, const std::vector<int>& gpus,
                           const std::vector<TaskShape>& workload, const std::vector<char>* allowed = nullptr);
// allowed_shapes(w, model)[i]: shape i may run on GPU model `model`.
std::vector<char> allowed_shapes(const std::vector<TaskShape>& workload, const std::string& model);
// F_n after placing `pod` on `gpus` of `node`, minus F_n now.
double fragmentation_delta(const NodeState& node, const Pod& pod, const std::vector<int>& gpus,
                           const std::vector<TaskShape>& workload);

struct FragmentationReport {
  double fragmented_milli = 0;
  double idle_milli = 0;
  double ratio() const { return idle_milli > 0 ? fragmented_milli / idle_milli : 0; }
};
FragmentationReport cluster_fragmentation(const Cluster& c, const std::vector<TaskShape>& workload);

// Whether `pod` (or a shape) is allowed on the node's GPU model.
bool model_allowed(const std::vector<std::string>& allowed, const std::string& model);

}  // namespace kgpu::sched
