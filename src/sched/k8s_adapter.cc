#include "sched/k8s_adapter.h"

#include <unordered_map>

namespace kgpu::sched {

namespace {

int64_t mib_ceil(const k8s::Quantity& q) {
  const int64_t bytes = q.value();
  return (bytes + (1 << 20) - 1) >> 20;
}

class NodeAffinityFilter : public FilterPlugin {
 public:
  NodeAffinityFilter(std::vector<k8s::NodeSelectorTerm> terms, std::span<const K8sNodeRef> nodes)
      : terms_(std::move(terms)) {
    for (const auto& n : nodes) by_name_.emplace(std::string(n.doc->metadata.name), n.doc);
  }
  const char* name() const override { return "NodeAffinity"; }
  std::optional<std::string> filter(const Pod&, const Node& node) const override {
    auto it = by_name_.find(node.name);
    if (it == by_name_.end()) return "node(s) didn't match Pod's node affinity/selector";
    if (k8s::matches_any(terms_, it->second->metadata.labels, it->second->metadata.name)) return std::nullopt;
    return "node(s) didn't match Pod's node affinity/selector";
  }

 private:
  std::vector<k8s::NodeSelectorTerm> terms_;
  std::unordered_map<std::string, const k8s::Document*> by_name_;
};

}  // namespace

bool holds_node_resources(const k8s::Pod& pod) {
  if (pod.spec.node_name->empty()) return false;
  const auto phase = *pod.status.phase;
  return phase != "Succeeded" && phase != "Failed";
}

Cluster cluster_from_k8s(std::span<const K8sNodeRef> nodes, std::span<const K8sPodRef> pods,
                         std::string_view resource) {
  std::vector<Node> out;
  out.reserve(nodes.size());
  std::unordered_map<std::string_view, size_t> index;
  for (const auto& ref : nodes) {
    Node n;
    n.name = std::string(ref.doc->metadata.name);
    const auto& alloc = ref.node->allocatable;
    if (auto it = alloc.find("cpu"); it != alloc.end()) n.cpu_milli = it->second->milli_value();
    if (auto it = alloc.find("memory"); it != alloc.end()) n.memory_mib = it->second->value() >> 20;
    int64_t units = 0;
    if (auto it = alloc.find(resource); it != alloc.end()) units = std::max<int64_t>(0, it->second->value());
    n.gpu_free.assign(static_cast<size_t>(units), kMilli);
    for (const auto& [k, v] : ref.doc->metadata.labels) n.labels.emplace(k, v);
    if (auto it = n.labels.find("nvidia.com/gpu.product"); it != n.labels.end()) n.gpu_model = it->second;
    for (const auto& t : ref.node->taints)
      n.taints.push_back(Taint{std::string(t.key), std::string(t.value), std::string(t.effect)});
    n.cpu_free = n.cpu_milli;
    n.memory_free = n.memory_mib;
    index.emplace(ref.doc->metadata.name, out.size());
    out.push_back(std::move(n));
  }
  for (const auto& ref : pods) {
    if (!holds_node_resources(*ref.pod)) continue;
    auto it = index.find(*ref.pod->spec.node_name);
    if (it == index.end()) continue;
    Node& n = out[it->second];
    n.cpu_free -= k8s::pod_request(ref.pod->spec, "cpu").milli_value();
    n.memory_free -= mib_ceil(k8s::pod_request(ref.pod->spec, "memory"));
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
  p.num_gpu = static_cast<int>(k8s::pod_request(pod.spec, resource).value());
  p.gpu_milli = kMilli;
  for (const auto& [k, v] : pod.spec.node_selector) p.node_selector.emplace(k, v);
  for (const auto& t : pod.spec.tolerations) {
    p.tolerations.push_back(Toleration{std::string(t.key), t.op.empty() ? "Equal" : std::string(t.op),
                                       std::string(t.value), std::string(t.effect)});
  }
  p.priority = static_cast<int>(pod.spec.priority.value_or(0));
  return p;
}

std::vector<std::unique_ptr<FilterPlugin>> filters_for(const k8s::Pod& pod, std::span<const K8sNodeRef> nodes) {
  std::vector<std::unique_ptr<FilterPlugin>> out;
  if (!pod.spec.required_node_affinity.empty()) {
    out.push_back(std::make_unique<NodeAffinityFilter>(pod.spec.required_node_affinity, nodes));
  }
  for (auto& f : default_filters()) out.push_back(std::move(f));
  return out;
}

FitReport explain_fit(const Pod& pod, const Cluster& cluster, std::span<const std::unique_ptr<FilterPlugin>> filters) {
  FitReport r;
  r.outcome.nodes = cluster.nodes().size();
  r.reasons.resize(cluster.nodes().size());
  r.plugin.resize(cluster.nodes().size());
  for (size_t i = 0; i < cluster.nodes().size(); ++i) {
    for (const auto& f : filters) {
      if (auto reason = f->filter(pod, cluster.node(i))) {
        ++r.outcome.reasons[*reason];
        r.reasons[i] = std::move(reason);
        r.plugin[i] = f->name();
        break;
      }
    }
    if (!r.reasons[i]) ++r.outcome.feasible;
  }
  return r;
}

}  // namespace kgpu::sched
