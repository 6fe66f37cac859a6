// Adapts Kubernetes objects (src/k8s views) into the scheduler's model, so that `kgpu doctor` asks
// the scheduler's own filter plugins whether a pod fits a node, node by node (explain_fit over
// default_filters(): required node affinity and cordons are part of the model), with typed
// statuses (sched::FitStatus).
//
// One device resource at a time: every allocatable unit of `resource` ("nvidia.com/gpu",
// "nvidia.com/mig-1g.10gb", ...) on a node becomes one GPU of kMilli in sched::NodeState::gpu_free. What
// is free is the node's allocatable minus the requests of the non-terminal pods bound to it
// (spec.nodeName set, phase neither Succeeded nor Failed): finished pods hold nothing, as in the
// real scheduler. CPU is in milli-CPU, memory in MiB (requests rounded up).
//
// Hostile quantities do not break the model: a node advertises at most kMaxGpusPerNode units of a
// resource (more, e.g. "1e12", is clamped to it), a pod's GPU count saturates at INT_MAX, and CPU
// and memory arithmetic saturates at the int64 limits ("8Ei" of memory does not wrap).
//
// Thread safety: plain functions over immutable inputs; the returned values are owned by the caller.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "k8s/document.h"
#include "k8s/objects.h"
#include "framework/cluster.h"
#include "framework/framework.h"

namespace kgpu::sched {

// The most units of one device resource a node is modelled with (see above).
inline constexpr int64_t kMaxGpusPerNode = 1024;

struct K8sNodeRef {
  const k8s::Document* doc = nullptr;
  const k8s::KubeNode* node = nullptr;
};

struct K8sPodRef {
  const k8s::Document* doc = nullptr;
  const k8s::Pod* pod = nullptr;
};

// True for pods whose resources the scheduler counts on their node: bound and not finished.
bool holds_node_resources(const k8s::Pod& pod);

// A node's name, labels, taints, cordon, allocatable CPU (milli) and memory (MiB), with nothing
// used and no GPUs (the caller adds them).
NodeState node_from_k8s(const k8s::Document& doc, const k8s::KubeNode& node);

// The cluster for `resource`; node i of the result is nodes[i]. GPU model: the node's
// nvidia.com/gpu.product label; Node::unschedulable: spec.unschedulable.
Cluster cluster_from_k8s(std::span<const K8sNodeRef> nodes, std::span<const K8sPodRef> pods, std::string_view resource);

// The pod as the scheduler sees it for `resource`: num_gpu = its request (whole units), node
// selector, required node affinity, tolerations (an empty operator is Equal), CPU and memory
// requests.
Pod pod_from_k8s(const k8s::Document& doc, const k8s::Pod& pod, std::string_view resource);

}  // namespace kgpu::sched
