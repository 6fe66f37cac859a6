#include "sched/framework.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace kgpu::sched {

namespace {

// ---- filters ----

class NodeSelectorFilter : public FilterPlugin {
 public:
  const char* name() const override { return "NodeSelector"; }
  std::optional<std::string> filter(const Pod& pod, const Node& node) const override {
    for (const auto& [k, v] : pod.node_selector) {
      auto it = node.labels.find(k);
      if (it == node.labels.end() || it->second != v) return "node(s) didn't match Pod's node selector";
    }
    return std::nullopt;
  }
};

class TaintFilter : public FilterPlugin {
 public:
  const char* name() const override { return "TaintToleration"; }
  std::optional<std::string> filter(const Pod& pod, const Node& node) const override {
    for (const auto& t : node.taints) {
      if (t.effect != "NoSchedule" && t.effect != "NoExecute") continue;
      const bool ok = std::any_of(pod.tolerations.begin(), pod.tolerations.end(),
                                  [&](const Toleration& tol) { return tol.tolerates(t); });
      if (!ok) return fmt::format("node(s) had untolerated taint {{{}: {}}}", t.key, t.value);
    }
    return std::nullopt;
  }
};

class ResourceFilter : public FilterPlugin {
 public:
  const char* name() const override { return "NodeResourcesFit"; }
  std::optional<std::string> filter(const Pod& pod, const Node& node) const override {
    if (pod.num_gpu > 0 && !model_allowed(pod.gpu_models, node.gpu_model)) return "GPU model mismatch";
    if (node.cpu_free < pod.cpu_milli) return "insufficient cpu";
    if (node.memory_free < pod.memory_mib) return "insufficient memory";
    if (pod.num_gpu == 0) return std::nullopt;
    if (node.gpus() < pod.num_gpu) return "insufficient nvidia.com/gpu";
    if (pod.sharing()) {
      if (node.max_gpu_free() < pod.gpu_milli) return "insufficient GPU share";
    } else if (node.full_free_gpus() < pod.num_gpu) {
      return "insufficient nvidia.com/gpu";
    }
    return std::nullopt;
  }
};

// ---- policies ----

double gpu_capacity(const Node& n) { return std::max(1.0, static_cast<double>(n.gpus()) * kMilli); }

class LeastAllocated : public ScorePlugin {
 public:
  explicit LeastAllocated(bool most) : most_(most) {}
  const char* name() const override { return most_ ? "MostAllocated" : "LeastAllocated"; }
  std::optional<NodeScore> score(const Pod& pod, const Node& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    // Kubernetes NodeResourcesFit: mean over resources of free (or used) fraction after placement.
    const double cpu = static_cast<double>(n.cpu_free - pod.cpu_milli) / std::max<int64_t>(1, n.cpu_milli);
    const double mem = static_cast<double>(n.memory_free - pod.memory_mib) / std::max<int64_t>(1, n.memory_mib);
    double fractions = cpu + mem;
    int resources = 2;
    if (n.gpus() > 0) {
      fractions += (static_cast<double>(n.gpu_free_total()) - static_cast<double>(pod.gpu_request())) / gpu_capacity(n);
      ++resources;
    }
    const double free = fractions / resources;
    return NodeScore{100.0 * (most_ ? 1.0 - free : free), std::move(*gpus)};
  }

 private:
  bool most_;
};

class RandomPolicy : public ScorePlugin {
 public:
  const char* name() const override { return "Random"; }
  std::optional<NodeScore> score(const Pod& pod, const Node& n, std::mt19937_64& rng) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    return NodeScore{std::uniform_real_distribution<double>(0, 1)(rng), std::move(*gpus)};
  }
};

// Tetris: alignment of the node's free resources with the pod's demand, both normalized.
class DotProduct : public ScorePlugin {
 public:
  const char* name() const override { return "DotProduct"; }
  std::optional<NodeScore> score(const Pod& pod, const Node& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    const double cpu_cap = std::max<int64_t>(1, n.cpu_milli);
    double dot = (static_cast<double>(n.cpu_free) / cpu_cap) * (static_cast<double>(pod.cpu_milli) / cpu_cap);
    if (n.gpus() > 0) {
      dot += (static_cast<double>(n.gpu_free_total()) / gpu_capacity(n)) *
             (static_cast<double>(pod.gpu_request()) / gpu_capacity(n));
    }
    return NodeScore{-dot, std::move(*gpus)};  // the smallest alignment leaves the best-shaped hole
  }
};

// Prefer nodes already running pods with the same GPU request.
class GpuClustering : public ScorePlugin {
 public:
  const char* name() const override { return "GpuClustering"; }
  std::optional<NodeScore> score(const Pod& pod, const Node& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    auto it = n.pods_by_gpu_request.find(static_cast<int>(pod.gpu_request()));
    const double same = it == n.pods_by_gpu_request.end() ? 0 : it->second;
    return NodeScore{same, std::move(*gpus)};
  }
};

// Prefer already-shared GPUs, then free GPUs on busy nodes, then idle nodes.
class GpuPacking : public ScorePlugin {
 public:
  const char* name() const override { return "GpuPacking"; }
  std::optional<NodeScore> score(const Pod& pod, const Node& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    double tier = 0;
    const bool busy = n.gpu_free_total() < static_cast<int64_t>(n.gpus()) * kMilli;
    if (pod.sharing() && !gpus->empty() && n.gpu_free[(*gpus)[0]] < kMilli) {
      tier = 3;  // lands on a GPU that is already shared
    } else if (busy) {
      tier = 2;
    } else {
      tier = 1;
    }
    return NodeScore{tier, std::move(*gpus)};
  }
};

// Least weighted leftover of CPU and GPU after placement (0.5 each).
double leftover(const Pod& pod, const Node& n) {
  const double cpu = static_cast<double>(n.cpu_free - pod.cpu_milli) / std::max<int64_t>(1, n.cpu_milli);
  const double gpu =
      n.gpus() == 0
          ? 0
          : (static_cast<double>(n.gpu_free_total()) - static_cast<double>(pod.gpu_request())) / gpu_capacity(n);
  return 0.5 * cpu + 0.5 * gpu;
}

class BestFit : public ScorePlugin {
 public:
  const char* name() const override { return "BestFit"; }
  std::optional<NodeScore> score(const Pod& pod, const Node& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    return NodeScore{-leftover(pod, n), std::move(*gpus)};
  }
};

// Fragmentation Gradient Descent: the placement (node and GPU) that grows fragmentation least.
// With `pack_ties`, near-equal fragmentation changes are broken towards the fuller node (ours).
class Fgd : public ScorePlugin {
 public:
  Fgd(const SchedulingContext& ctx, bool pack_ties) : workload_(ctx.workload), pack_(pack_ties) {}
  const char* name() const override { return pack_ ? "FGDPack" : "FGD"; }
  std::optional<NodeScore> score(const Pod& pod, const Node& n, std::mt19937_64&) override {
    std::vector<std::vector<int>> candidates;
    if (pod.sharing()) {
      std::set<int> seen;  // GPUs with equal free capacity give equal changes
      for (int g = 0; g < n.gpus(); ++g) {
        if (n.gpu_free[g] >= pod.gpu_milli && seen.insert(n.gpu_free[g]).second) candidates.push_back({g});
      }
    } else if (auto gpus = default_gpus(pod, n)) {
      candidates.push_back(std::move(*gpus));
    }
    std::optional<NodeScore> best;
    for (auto& c : candidates) {
      double s = -fragmentation_delta(n, pod, c, workload_);
      if (pack_) s -= leftover(pod, n) * 1e-3;
      if (!best || s > best->score) best = NodeScore{s, std::move(c)};
    }
    return best;
  }

 private:
  std::vector<TaskShape> workload_;
  bool pack_;
};

}  // namespace

std::string Outcome::message() const {
  int feasible = placement ? 1 : 0;
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [r, n] : reasons) sorted.emplace_back(n, r);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = fmt::format("{}/{} nodes are available", feasible, nodes);
  for (size_t i = 0; i < sorted.size(); ++i) {
    out += fmt::format("{} {} {}", i == 0 ? ":" : ",", sorted[i].first, sorted[i].second);
  }
  return out + ".";
}

Framework::Framework(std::vector<std::unique_ptr<FilterPlugin>> filters, std::unique_ptr<ScorePlugin> score)
    : filters_(std::move(filters)), score_(std::move(score)) {}

Outcome Framework::schedule(const Pod& pod, Cluster& cluster, std::mt19937_64& rng) {
  Outcome out;
  out.nodes = cluster.nodes().size();
  feasible_.clear();
  for (size_t i = 0; i < cluster.nodes().size(); ++i) {
    const Node& n = cluster.node(i);
    bool ok = true;
    for (const auto& f : filters_) {
      if (auto reason = f->filter(pod, n)) {
        ++out.reasons[*reason];
        ok = false;
        break;
      }
    }
    if (ok) feasible_.push_back(i);
  }
  if (feasible_.empty()) return out;
  score_->prepare(pod, cluster);
  scores_.assign(feasible_.size(), NodeScore{});
  std::vector<size_t> scored;
  double lo = 0, hi = 0;
  for (size_t k = 0; k < feasible_.size(); ++k) {
    auto s = score_->score(pod, cluster.node(feasible_[k]), rng);
    if (!s) {
      ++out.reasons["no placement on the node's GPUs"];
      continue;
    }
    if (scored.empty() || s->score < lo) lo = s->score;
    if (scored.empty() || s->score > hi) hi = s->score;
    scores_[k] = std::move(*s);
    scored.push_back(k);
  }
  if (scored.empty()) return out;
  // NormalizeScore to 0..100, then the highest wins; ties at random (reservoir sampling).
  const double span = hi - lo;
  size_t chosen = scored[0];
  double best = -1;
  int ties = 0;
  for (size_t k : scored) {
    const double norm = span > 0 ? 100.0 * (scores_[k].score - lo) / span : 100.0;
    if (norm > best + 1e-9) {
      best = norm;
      chosen = k;
      ties = 1;
    } else if (norm > best - 1e-9 && std::uniform_int_distribution<int>(0, ties++)(rng) == 0) {
      chosen = k;
    }
  }
  Placement p{feasible_[chosen], std::move(scores_[chosen].gpus)};
  cluster.assign(pod, p);
  out.placement = std::move(p);
  return out;
}

std::vector<std::unique_ptr<FilterPlugin>> default_filters() {
  std::vector<std::unique_ptr<FilterPlugin>> f;
  f.push_back(std::make_unique<NodeSelectorFilter>());
  f.push_back(std::make_unique<TaintFilter>());
  f.push_back(std::make_unique<ResourceFilter>());
  return f;
}

const std::map<std::string, PolicyFactory>& policy_registry() {
  static const std::map<std::string, PolicyFactory> kRegistry = {
      {"LeastAllocated", [](const SchedulingContext&) { return std::make_unique<LeastAllocated>(false); }},
      {"MostAllocated", [](const SchedulingContext&) { return std::make_unique<LeastAllocated>(true); }},
      {"Random", [](const SchedulingContext&) { return std::make_unique<RandomPolicy>(); }},
      {"DotProduct", [](const SchedulingContext&) { return std::make_unique<DotProduct>(); }},
      {"GpuClustering", [](const SchedulingContext&) { return std::make_unique<GpuClustering>(); }},
      {"GpuPacking", [](const SchedulingContext&) { return std::make_unique<GpuPacking>(); }},
      {"BestFit", [](const SchedulingContext&) { return std::make_unique<BestFit>(); }},
      {"FGD", [](const SchedulingContext& c) { return std::make_unique<Fgd>(c, false); }},
      {"FGDPack", [](const SchedulingContext& c) { return std::make_unique<Fgd>(c, true); }},
  };
  return kRegistry;
}

Result<Framework> make_framework(const std::string& policy, const SchedulingContext& ctx) {
  const auto& reg = policy_registry();
  auto it = reg.find(policy);
  if (it == reg.end()) {
    std::vector<std::string> names;
    for (const auto& [n, f] : reg) names.push_back(n);
    return fail(ErrorCode::kInvalidArgument, "unknown policy '{}' (known: {})", policy, fmt::join(names, ", "));
  }
  return Framework(default_filters(), it->second(ctx));
}

}  // namespace kgpu::sched
