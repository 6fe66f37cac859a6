#include "sched/k8s_adapter.h"

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

const char* const kUnschedulable = "node(s) were unschedulable";

bool tolerates_unschedulable(const Pod& pod) {
  const Taint taint{"node.kubernetes.io/unschedulable", "", "NoSchedule"};
  return std::any_of(pod.tolerations.begin(), pod.tolerations.end(),
                     [&](const Toleration& t) { return t.tolerates(taint); });
}

// The scheduler's NodeUnschedulable plugin: a cordoned node (spec.unschedulable) takes no new pods
// unless they tolerate node.kubernetes.io/unschedulable:NoSchedule.
class NodeUnschedulableFilter : public FilterPlugin {
 public:
  explicit NodeUnschedulableFilter(std::span<const K8sNodeRef> nodes) {
    for (const auto& n : nodes) {
      if (n.node->unschedulable.value_or(false)) cordoned_.emplace(std::string(n.doc->metadata.name), true);
    }
  }
  const char* name() const override { return "NodeUnschedulable"; }
  std::optional<std::string> filter(const Pod& pod, const Node& node) const override {
    if (!cordoned_.contains(node.name) || tolerates_unschedulable(pod)) return std::nullopt;
    return std::string(kUnschedulable);
  }

 private:
  std::unordered_map<std::string, bool> cordoned_;
};

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
    units = std::min(units, kMaxGpusPerNode);
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
  p.priority = static_cast<int>(std::clamp<int64_t>(pod.spec.priority.value_or(0), std::numeric_limits<int>::min(),
                                                    std::numeric_limits<int>::max()));
  return p;
}

std::vector<std::unique_ptr<FilterPlugin>> filters_for(const k8s::Pod& pod, std::span<const K8sNodeRef> nodes) {
  std::vector<std::unique_ptr<FilterPlugin>> out;
  if (!pod.spec.required_node_affinity.empty()) {
    out.push_back(std::make_unique<NodeAffinityFilter>(pod.spec.required_node_affinity, nodes));
  }
  for (auto& f : default_filters()) {
    const bool selector = std::string_view(f->name()) == "NodeSelector";
    out.push_back(std::move(f));
    if (selector) out.push_back(std::make_unique<NodeUnschedulableFilter>(nodes));
  }
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
