#include "framework/k8s_adapter.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace kgpu::sched {

namespace {

constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kInt64Min = std::numeric_limits<int64_t>::min();

int64_t sat_add(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_add_overflow(a, b, &r)) return b > 0 ? kInt64Max : kInt64Min;
  return r;
}

int64_t sat_sub(int64_t a, int64_t b) {
  int64_t r = 0;
  if (__builtin_sub_overflow(a, b, &r)) return b < 0 ? kInt64Max : kInt64Min;
  return r;
}

int64_t mib_ceil(const k8s::Quantity& q) {
  const int64_t bytes = q.value();
  if (bytes <= 0) return bytes >> 20;
  return (sat_add(bytes, (1 << 20) - 1)) >> 20;
}

}  // namespace

NodeState node_from_k8s(const k8s::Document& doc, const k8s::KubeNode& node) {
  NodeState n;
  n.name = std::string(doc.metadata.name);
  const auto& alloc = node.allocatable;
  if (auto it = alloc.find("cpu"); it != alloc.end()) n.cpu_milli = it->second->milli_value();
  if (auto it = alloc.find("memory"); it != alloc.end()) n.memory_mib = it->second->value() >> 20;
  for (const auto& [k, v] : doc.metadata.labels) n.labels.emplace(k, v);
  if (auto it = n.labels.find("nvidia.com/gpu.product"); it != n.labels.end()) n.gpu_model = it->second;
  for (const auto& t : node.taints)
    n.taints.push_back(Taint{std::string(t.key), std::string(t.value), std::string(t.effect)});
  n.unschedulable = node.unschedulable.value_or(false);
  n.cpu_free = n.cpu_milli;
  n.memory_free = n.memory_mib;
  return n;
}

bool holds_node_resources(const k8s::Pod& pod) {
  if (pod.spec.node_name->empty()) return false;
  const auto phase = *pod.status.phase;
  return phase != "Succeeded" && phase != "Failed";
}

Cluster cluster_from_k8s(std::span<const K8sNodeRef> nodes, std::span<const K8sPodRef> pods,
                         std::string_view resource) {
  std::vector<NodeState> out;
  out.reserve(nodes.size());
  std::unordered_map<std::string_view, size_t> index;
  for (const auto& ref : nodes) {
    NodeState n = node_from_k8s(*ref.doc, *ref.node);
    int64_t units = 0;
    if (auto it = ref.node->allocatable.find(resource); it != ref.node->allocatable.end())
      units = std::max<int64_t>(0, it->second->value());
    units = std::min(units, kMaxGpusPerNode);
    n.gpu_free.assign(static_cast<size_t>(units), kMilli);
    index.emplace(ref.doc->metadata.name, out.size());
    out.push_back(std::move(n));
  }
  for (const auto& ref : pods) {
    if (!holds_node_resources(*ref.pod)) continue;
    auto it = index.find(*ref.pod->spec.node_name);
    if (it == index.end()) continue;
    NodeState& n = out[it->second];
    n.cpu_free = sat_sub(n.cpu_free, k8s::pod_request(ref.pod->spec, "cpu").milli_value());
    n.memory_free = sat_sub(n.memory_free, mib_ceil(k8s::pod_request(ref.pod->spec, "memory")));
    int64_t used = k8s::pod_request(ref.pod->spec, resource).value();
    for (auto& g : n.gpu_free) {
      if (used <= 0) break;
      if (g == kMilli) {
        g = 0;
        --used;
      }
    }
    ++n.pods;
  }
  return Cluster(std::move(out));
}

Pod pod_from_k8s(const k8s::Document& doc, const k8s::Pod& pod, std::string_view resource) {
  Pod p;
  p.name = doc.ref();
  p.cpu_milli = k8s::pod_request(pod.spec, "cpu").milli_value();
  p.memory_mib = mib_ceil(k8s::pod_request(pod.spec, "memory"));
  const int64_t gpus = k8s::pod_request(pod.spec, resource).value();
  p.num_gpu =
      static_cast<int>(std::clamp<int64_t>(gpus, std::numeric_limits<int>::min(), std::numeric_limits<int>::max()));
  p.gpu_milli = kMilli;
  for (const auto& [k, v] : pod.spec.node_selector) p.node_selector.emplace(k, v);
  for (const auto& t : pod.spec.tolerations) {
    p.tolerations.push_back(Toleration{std::string(t.key), t.op.empty() ? "Equal" : std::string(t.op),
                                       std::string(t.value), std::string(t.effect)});
  }
  const auto requirements = [](const std::vector<k8s::NodeSelectorRequirement>& rs) {
    std::vector<NodeSelectorRequirement> out;
    for (const auto& r : rs) {
      out.push_back(NodeSelectorRequirement{std::string(r.key), std::string(r.op), {r.values.begin(), r.values.end()}});
    }
    return out;
  };
  for (const auto& term : pod.spec.required_node_affinity) {
    p.required_affinity.push_back(
        NodeSelectorTerm{requirements(term.match_expressions), requirements(term.match_fields)});
  }
  p.priority = static_cast<int>(std::clamp<int64_t>(pod.spec.priority.value_or(0), std::numeric_limits<int>::min(),
                                                    std::numeric_limits<int>::max()));
  return p;
}

}  // namespace kgpu::sched
