#include "sched/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace kgpu::sched {

bool model_allowed(const std::vector<std::string>& allowed, const std::string& model) {
  return allowed.empty() || std::find(allowed.begin(), allowed.end(), model) != allowed.end();
}

std::vector<TaskShape> target_workload(const std::vector<Pod>& pods, double coverage) {
  // A shape is (CPU, GPU share, GPU count, GPU models); memory does not enter it. Ties in popularity
  // put the larger shape first (CPU, then share, count, models, all descending).
  using Key = std::tuple<int64_t, int, int, std::vector<std::string>>;
  std::map<Key, int> counts;
  for (const auto& p : pods) ++counts[{p.cpu_milli, p.gpu_milli, p.num_gpu, p.gpu_models}];
  std::vector<std::pair<int, Key>> sorted;
  for (const auto& [k, n] : counts) sorted.emplace_back(n, k);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second > b.second;
  });
  std::vector<TaskShape> out;
  const double total = static_cast<double>(pods.size());
  double covered = 0;
  for (const auto& [n, k] : sorted) {
    if (covered >= coverage * total) break;
    covered += n;
    out.push_back({std::get<0>(k), 0, std::get<2>(k), std::get<1>(k), std::get<3>(k), double(n)});
  }
  for (auto& s : out) s.popularity /= covered;
  return out;
}

namespace {

// Per-node aggregates that decide whether a shape fits, so a shape's fragmentation is O(GPUs).
bool fits(const Node& n, const TaskShape& m, int64_t cpu_free, int64_t mem_free, const std::vector<int>& free) {
  if (m.num_gpu == 0) return false;                                     // CPU-only tasks never use idle GPU capacity
  if (cpu_free < m.cpu_milli || mem_free < m.memory_mib) return false;  // memory_mib is 0 for trace shapes
  if (!model_allowed(m.gpu_models, n.gpu_model)) return false;
  if (m.num_gpu == 1 && m.gpu_milli < kMilli) {
    return std::any_of(free.begin(), free.end(), [&](int f) { return f >= m.gpu_milli; });
  }
  return std::count(free.begin(), free.end(), kMilli) >= m.num_gpu;
}

double frag_of(const Node& n, const TaskShape& m, int64_t cpu_free, int64_t mem_free, const std::vector<int>& free) {
  double sum = 0;
  if (!fits(n, m, cpu_free, mem_free, free)) {
    for (int f : free) sum += f;
    return sum;
  }
  const int need = m.num_gpu == 1 ? m.gpu_milli : kMilli;
  for (int f : free) {
    if (f < need) sum += f;
  }
  return sum;
}

double node_frag(const Node& n, const std::vector<TaskShape>& w, int64_t cpu_free, int64_t mem_free,
                 const std::vector<int>& free) {
  double f = 0;
  for (const auto& m : w) f += m.popularity * frag_of(n, m, cpu_free, mem_free, free);
  return f;
}

}  // namespace

double fragmentation(const Node& node, const TaskShape& m) {
  return frag_of(node, m, node.cpu_free, node.memory_free, node.gpu_free);
}

double fragmentation(const Node& node, const std::vector<TaskShape>& workload) {
  return node_frag(node, workload, node.cpu_free, node.memory_free, node.gpu_free);
}

double fragmentation_after(const Node& node, const Pod& pod, const std::vector<int>& gpus,
                           const std::vector<TaskShape>& workload) {
  std::vector<int> after = node.gpu_free;
  for (int g : gpus) after[g] -= pod.num_gpu == 1 ? pod.gpu_milli : kMilli;
  return node_frag(node, workload, node.cpu_free - pod.cpu_milli, node.memory_free - pod.memory_mib, after);
}

double fragmentation_delta(const Node& node, const Pod& pod, const std::vector<int>& gpus,
                           const std::vector<TaskShape>& workload) {
  return fragmentation_after(node, pod, gpus, workload) - fragmentation(node, workload);
}

FragmentationReport cluster_fragmentation(const Cluster& c, const std::vector<TaskShape>& workload) {
  FragmentationReport r;
  for (const auto& n : c.nodes()) {
    r.fragmented_milli += fragmentation(n, workload);
    r.idle_milli += static_cast<double>(n.gpu_free_total());
  }
  return r;
}

}  // namespace kgpu::sched
