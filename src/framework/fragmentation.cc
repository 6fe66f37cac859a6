#include "framework/fragmentation.h"

#include <algorithm>
#include <array>
#include <span>
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

// A node state's aggregates, computed once so that each shape's fit is O(1).
struct State {
  int64_t cpu_free, mem_free;
  std::span<const int> free;
  int64_t idle = 0;
  int max_free = 0;
  int full = 0;
  State(int64_t cpu, int64_t mem, std::span<const int> f) : cpu_free(cpu), mem_free(mem), free(f) {
    for (int x : f) {
      idle += x;
      max_free = std::max(max_free, x);
      full += x == kMilli ? 1 : 0;
    }
  }
};

bool fits(const TaskShape& m, bool model_ok, const State& s) {
  if (m.num_gpu == 0) return false;  // CPU-only tasks never use idle GPU capacity
  if (s.cpu_free < m.cpu_milli || s.mem_free < m.memory_mib) return false;  // memory_mib is 0 for trace shapes
  if (!model_ok) return false;
  if (m.num_gpu == 1 && m.gpu_milli < kMilli) return s.max_free >= m.gpu_milli;
  return s.full >= m.num_gpu;
}

double frag_of(const TaskShape& m, bool model_ok, const State& s) {
  if (!fits(m, model_ok, s)) return static_cast<double>(s.idle);
  const int need = m.num_gpu == 1 ? m.gpu_milli : kMilli;
  double sum = 0;
  for (int f : s.free) {
    if (f < need) sum += f;
  }
  return sum;
}

// `allowed[i]`: shape i may use this node's GPU model (checked here when null).
double node_frag(const NodeState& n, const std::vector<TaskShape>& w, const State& s, const std::vector<char>* allowed) {
  double f = 0;
  for (size_t i = 0; i < w.size(); ++i) {
    const bool ok = allowed != nullptr ? (*allowed)[i] != 0 : model_allowed(w[i].gpu_models, n.gpu_model);
    f += w[i].popularity * frag_of(w[i], ok, s);
  }
  return f;
}

}  // namespace

double fragmentation(const NodeState& node, const TaskShape& m) {
  return frag_of(m, model_allowed(m.gpu_models, node.gpu_model), State(node.cpu_free, node.memory_free, node.gpu_free));
}

double fragmentation(const NodeState& node, const std::vector<TaskShape>& workload, const std::vector<char>* allowed) {
  return node_frag(node, workload, State(node.cpu_free, node.memory_free, node.gpu_free), allowed);
}

std::vector<char> allowed_shapes(const std::vector<TaskShape>& workload, const std::string& model) {
  std::vector<char> out;
  out.reserve(workload.size());
  for (const auto& m : workload) out.push_back(model_allowed(m.gpu_models, model) ? 1 : 0);
  return out;
}

double fragmentation_after(const NodeState& node, const Pod& pod, const std::vector<int>& gpus,
                           const std::vector<TaskShape>& workload, const std::vector<char>* allowed) {
  // The free shares after placement: on the stack for nodes of up to 16 GPUs.
  std::array<int, 16> small;
  std::vector<int> large;
  std::span<int> after;
  if (node.gpu_free.size() <= small.size()) {
    after = std::span<int>(small.data(), node.gpu_free.size());
  } else {
    large.resize(node.gpu_free.size());
    after = large;
  }
  std::copy(node.gpu_free.begin(), node.gpu_free.end(), after.begin());
  for (int g : gpus) after[static_cast<size_t>(g)] -= pod.num_gpu == 1 ? pod.gpu_milli : kMilli;
  return node_frag(node, workload, State(node.cpu_free - pod.cpu_milli, node.memory_free - pod.memory_mib, after),
                   allowed);
}

double fragmentation_delta(const NodeState& node, const Pod& pod, const std::vector<int>& gpus,
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
