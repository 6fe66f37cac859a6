#include "framework/cluster.h"

#include <algorithm>
#include <atomic>
#include <numeric>

#include "k8s/predicates.h"

namespace kgpu::sched {

namespace {
// Never repeats, so a cache keyed on (node address, version) cannot mistake another cluster's
// node, or a restored snapshot, for the state it cached.
uint64_t next_version() {
  static std::atomic<uint64_t> counter{0};
  return ++counter;
}
}  // namespace

Cluster::Identity::Identity() : value(next_version()) {}
Cluster::Identity::Identity(const Identity&) : value(next_version()) {}
Cluster::Identity& Cluster::Identity::operator=(const Identity&) {
  value = next_version();
  return *this;
}

void Cluster::record(size_t node) {
  log_.push_back(static_cast<uint32_t>(node));
  const size_t keep = std::max<size_t>(65536, 8 * nodes_.size());
  if (log_.size() > 2 * keep) {
    const size_t drop = log_.size() - keep;
    log_.erase(log_.begin(), log_.begin() + static_cast<std::ptrdiff_t>(drop));
    log_base_ += drop;
  }
}

std::optional<std::span<const uint32_t>> Cluster::changes_since(uint64_t seq) const {
  if (seq < log_base_ || seq > change_seq()) return std::nullopt;
  return std::span<const uint32_t>(log_).subspan(seq - log_base_);
}

bool Toleration::tolerates(const Taint& t) const {
  return k8s::toleration_tolerates(key, op, value, effect, t.key, t.value, t.effect);
}

bool Pod::tolerates(const Taint& t) const {
  return std::any_of(tolerations.begin(), tolerations.end(), [&](const Toleration& tol) { return tol.tolerates(t); });
}

bool Pod::tolerates_unschedulable() const {
  static const Taint kTaint{"node.kubernetes.io/unschedulable", "", "NoSchedule"};
  return tolerates(kTaint);
}

namespace {
bool term_matches(const NodeSelectorTerm& term, const NodeState& node) {
  if (term.match_expressions.empty() && term.match_fields.empty()) return false;
  for (const auto& r : term.match_expressions) {
    const auto it = node.labels.find(r.key);
    const auto value = it == node.labels.end() ? std::nullopt : std::optional<std::string_view>(it->second);
    if (!k8s::node_requirement_holds(r.op, r.values, value)) return false;
  }
  for (const auto& r : term.match_fields) {
    if (r.key != "metadata.name" || !k8s::node_requirement_holds(r.op, r.values, node.name)) return false;
  }
  return true;
}
}  // namespace

bool Pod::affinity_matches(const NodeState& node) const {
  if (required_affinity.empty()) return true;
  return std::any_of(required_affinity.begin(), required_affinity.end(),
                     [&](const NodeSelectorTerm& t) { return term_matches(t, node); });
}

bool Pod::affinity_reads_node_name() const {
  return std::any_of(required_affinity.begin(), required_affinity.end(),
                     [](const NodeSelectorTerm& t) { return !t.match_fields.empty(); });
}

int64_t NodeState::gpu_free_total() const { return std::accumulate(gpu_free.begin(), gpu_free.end(), int64_t{0}); }

int NodeState::full_free_gpus() const { return static_cast<int>(std::count(gpu_free.begin(), gpu_free.end(), kMilli)); }

int NodeState::max_gpu_free() const { return gpu_free.empty() ? 0 : *std::max_element(gpu_free.begin(), gpu_free.end()); }

NodeRoom NodeRoom::of(const NodeState& n) {
  NodeRoom r;
  r.cpu_free = n.cpu_free;
  r.memory_free = n.memory_free;
  r.version = n.version;
  r.gpus = static_cast<int32_t>(n.gpus());
  r.max_gpu_free = n.gpu_free.empty() ? 0 : n.gpu_free.front();  // as NodeState::max_gpu_free()
  for (int f : n.gpu_free) {
    r.max_gpu_free = std::max(r.max_gpu_free, f);
    r.full_free_gpus += f == kMilli ? 1 : 0;
  }
  return r;
}

Cluster::Cluster(std::vector<NodeState> nodes) : nodes_(std::move(nodes)) {
  rooms_.reserve(nodes_.size());
  for (auto& n : nodes_) {
    n.version = next_version();
    rooms_.push_back(NodeRoom::of(n));
    gpu_capacity_ += static_cast<int64_t>(n.gpus()) * kMilli;
    gpu_allocated_ += static_cast<int64_t>(n.gpus()) * kMilli - n.gpu_free_total();
  }
}

void Cluster::assign(const Pod& pod, const Placement& p) {
  NodeState& n = nodes_[p.node];
  n.cpu_free -= pod.cpu_milli;
  n.memory_free -= pod.memory_mib;
  for (int g : p.gpus) n.gpu_free[g] -= pod.num_gpu == 1 ? pod.gpu_milli : kMilli;
  gpu_allocated_ += pod.gpu_request();
  ++n.pods;
  n.version = next_version();
  rooms_[p.node] = NodeRoom::of(n);
  record(p.node);
  if (pod.num_gpu > 0) ++n.gpu_pods_by_tag[pod.gpu_tag()];
}

void Cluster::release(const Pod& pod, const Placement& p) {
  NodeState& n = nodes_[p.node];
  n.cpu_free += pod.cpu_milli;
  n.memory_free += pod.memory_mib;
  for (int g : p.gpus) n.gpu_free[g] += pod.num_gpu == 1 ? pod.gpu_milli : kMilli;
  gpu_allocated_ -= pod.gpu_request();
  --n.pods;
  n.version = next_version();
  rooms_[p.node] = NodeRoom::of(n);
  record(p.node);
  if (pod.num_gpu > 0 && --n.gpu_pods_by_tag[pod.gpu_tag()] == 0) n.gpu_pods_by_tag.erase(pod.gpu_tag());
}

std::string Pod::gpu_tag() const {
  if (num_gpu == 0) return "";
  return sharing() ? "share-gpu" : std::to_string(num_gpu) + "-gpu";
}

std::optional<std::vector<int>> default_gpus(const Pod& pod, const NodeState& node) {
  if (pod.num_gpu == 0) return std::vector<int>{};
  if (pod.sharing()) {
    int best = -1;
    for (int g = 0; g < node.gpus(); ++g) {
      if (node.gpu_free[g] >= pod.gpu_milli && (best < 0 || node.gpu_free[g] < node.gpu_free[best])) best = g;
    }
    if (best < 0) return std::nullopt;
    return std::vector<int>{best};
  }
  std::vector<int> out;
  for (int g = 0; g < node.gpus() && static_cast<int>(out.size()) < pod.num_gpu; ++g) {
    if (node.gpu_free[g] == kMilli) out.push_back(g);
  }
  if (static_cast<int>(out.size()) < pod.num_gpu) return std::nullopt;
  return out;
}

}  // namespace kgpu::sched
