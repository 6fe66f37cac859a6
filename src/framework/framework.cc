#include "framework/framework.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <deque>
#include <limits>
#include <set>
#include <string_view>
#include <typeinfo>
#include <unordered_map>
#include <utility>

#include "k8s/predicates.h"

namespace kgpu::sched {

namespace {

// ---- filters ----

class NodeAffinityFilter : public FilterPlugin {
 public:
  const char* name() const override { return "NodeAffinity"; }
  FitStatus filter(const Pod& pod, const NodeState& node) const override {
    if (pod.affinity_matches(node)) return {};
    return {FitCode::kNodeAffinity, name()};
  }
};

class NodeSelectorFilter : public FilterPlugin {
 public:
  const char* name() const override { return "NodeSelector"; }
  FitStatus filter(const Pod& pod, const NodeState& node) const override {
    for (const auto& [k, v] : pod.node_selector) {
      auto it = node.labels.find(k);
      if (it == node.labels.end() || it->second != v) return {FitCode::kNodeAffinity, name()};
    }
    return {};
  }
};

// The scheduler's NodeUnschedulable plugin: a cordoned node takes no new pods unless they
// tolerate node.kubernetes.io/unschedulable:NoSchedule.
class NodeUnschedulableFilter : public FilterPlugin {
 public:
  const char* name() const override { return "NodeUnschedulable"; }
  FitStatus filter(const Pod& pod, const NodeState& node) const override {
    if (!node.unschedulable || pod.tolerates_unschedulable()) return {};
    return {FitCode::kUnschedulable, name()};
  }
};

class TaintFilter : public FilterPlugin {
 public:
  const char* name() const override { return "TaintToleration"; }
  FitStatus filter(const Pod& pod, const NodeState& node) const override {
    for (size_t i = 0; i < node.taints.size(); ++i) {
      const Taint& t = node.taints[i];
      if (k8s::taint_filters(t.effect) && !pod.tolerates(t))
        return {FitCode::kUntoleratedTaint, name(), "", static_cast<int>(i)};
    }
    return {};
  }
};

class ResourceFilter : public FilterPlugin {
 public:
  static constexpr const char* kName = "NodeResourcesFit";
  const char* name() const override { return kName; }
  FitStatus filter(const Pod& pod, const NodeState& node) const override {
    if (pod.num_gpu > 0 && !model_allowed(pod.gpu_models, node.gpu_model)) return {FitCode::kGpuModel, name()};
    return status(room_fit(pod, NodeRoom::of(node)));
  }
  // The checks after the GPU model, on what placements change only: the incremental path
  // re-checks a changed node from Cluster::room alone.
  enum class Room : uint8_t { kFits, kCpu, kMemory, kGpus, kShare };
  static constexpr size_t kRoomValues = 5;
  static Room room_fit(const Pod& pod, const NodeRoom& room) {
    if (room.cpu_free < pod.cpu_milli) return Room::kCpu;
    if (room.memory_free < pod.memory_mib) return Room::kMemory;
    if (pod.num_gpu == 0) return Room::kFits;
    if (room.gpus < pod.num_gpu) return Room::kGpus;
    if (pod.sharing()) {
      if (room.max_gpu_free < pod.gpu_milli) return Room::kShare;
    } else if (room.full_free_gpus < pod.num_gpu) {
      return Room::kGpus;
    }
    return Room::kFits;
  }
  static FitStatus status(Room r) {
    switch (r) {
      case Room::kFits:
        return {};
      case Room::kCpu:
        return {FitCode::kInsufficient, kName, "cpu"};
      case Room::kMemory:
        return {FitCode::kInsufficient, kName, "memory"};
      case Room::kGpus:
        return {FitCode::kInsufficient, kName, kGpu};
      case Room::kShare:
        return {FitCode::kGpuShare, kName};
    }
    return {};
  }

 private:
  static constexpr const char* kGpu = "nvidia.com/gpu";
};

// Whether `filters` are default_filters() (same plugins, same order): then a node's filter
// outcome for a pod splits into what assign/release never change (labels, taints, cordon, GPU
// model: every status but kInsufficient and kGpuShare) and ResourceFilter::room_fit.
bool are_default_filters(std::span<const std::unique_ptr<FilterPlugin>> filters);

// Reasons by message, counted by status first: statuses other than taints have a fixed text, so
// a scan formats each distinct one once, not once per node.
class ReasonTally {
 public:
  void add(const FitStatus& s, const NodeState& node) {
    if (s.code == FitCode::kUntoleratedTaint) {
      ++text_[s.message(node)];
      return;
    }
    for (auto& [st, n] : fixed_) {
      if (st == s) {
        ++n;
        return;
      }
    }
    fixed_.emplace_back(s, 1);
  }
  void into(std::map<std::string, int>& out) {
    static const NodeState kNone;
    for (const auto& [st, n] : fixed_) out[st.message(kNone)] += n;
    for (auto& [text, n] : text_) out[text] += n;
  }

 private:
  std::vector<std::pair<FitStatus, int>> fixed_;
  std::map<std::string, int> text_;
};

// ---- policies ----
//
// The FGD paper's baselines as its authors' simulator defines them: integer scores 0..100, CPU
// and GPU normalized by a 128-core, 8-GPU node, the GPU inside a node chosen "best" (the fitting
// GPU with the least free share), ties between nodes broken at random by the framework.

constexpr double kCpuNorm = 128000;  // milli-CPU
constexpr double kGpuNorm = 8000;    // milli-GPU

// A random fitting GPU for a share (reservoir sampling); whole GPUs as default_gpus.
std::optional<std::vector<int>> random_gpus(const Pod& pod, const NodeState& n, std::mt19937_64& rng) {
  if (!pod.sharing()) return default_gpus(pod, n);
  int chosen = -1, seen = 0;
  for (int g = 0; g < n.gpus(); ++g) {
    if (n.gpu_free[g] >= pod.gpu_milli && std::uniform_int_distribution<int>(0, seen++)(rng) == 0) chosen = g;
  }
  if (chosen < 0) return std::nullopt;
  return std::vector<int>{chosen};
}

class LeastAllocated : public ScorePlugin {
 public:
  bool pure() const override { return true; }
  explicit LeastAllocated(bool most) : most_(most) {}
  const char* name() const override { return most_ ? "MostAllocated" : "LeastAllocated"; }
  std::optional<NodeScore> score(const Pod& pod, const NodeState& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    // Kubernetes NodeResourcesFit: mean over resources of the free (or used) fraction after placement.
    const double cpu = static_cast<double>(n.cpu_free - pod.cpu_milli) / std::max<int64_t>(1, n.cpu_milli);
    const double mem = static_cast<double>(n.memory_free - pod.memory_mib) / std::max<int64_t>(1, n.memory_mib);
    double fractions = cpu + mem;
    int resources = 2;
    if (n.gpus() > 0) {
      fractions += (static_cast<double>(n.gpu_free_total()) - static_cast<double>(pod.gpu_request())) /
                   (static_cast<double>(n.gpus()) * kMilli);
      ++resources;
    }
    const double free = fractions / resources;
    return NodeScore{std::trunc(100.0 * (most_ ? 1.0 - free : free)), std::move(*gpus)};
  }

 private:
  bool most_;
};

// One feasible node at random scores 100, the others 0; a random fitting GPU on it.
class RandomPolicy : public ScorePlugin {
 public:
  const char* name() const override { return "Random"; }
  std::optional<NodeScore> score(const Pod& pod, const NodeState& n, std::mt19937_64& rng) override {
    auto gpus = random_gpus(pod, n, rng);
    if (!gpus) return std::nullopt;
    // A uniform random score: the best is a uniformly random feasible node, whatever the tie-break.
    return NodeScore{std::uniform_real_distribution<double>(0, 1)(rng), std::move(*gpus)};
  }
};

// Tetris: 100 * (1 - dot/2) of the node's free and the pod's requested (CPU, GPU) vectors.
class DotProduct : public ScorePlugin {
 public:
  bool pure() const override { return true; }
  const char* name() const override { return "DotProduct"; }
  std::optional<NodeScore> score(const Pod& pod, const NodeState& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    const double dot =
        (static_cast<double>(n.cpu_free) / kCpuNorm) * (static_cast<double>(pod.cpu_milli) / kCpuNorm) +
        (static_cast<double>(n.gpu_free_total()) / kGpuNorm) * (static_cast<double>(pod.gpu_request()) / kGpuNorm);
    return NodeScore{std::trunc(100.0 * (1.0 - dot / 2.0)), std::move(*gpus)};
  }
};

// Prefer nodes whose GPU pods are of the same class (share-gpu, 1-gpu, 2-gpu...), and fuller nodes.
class GpuClustering : public ScorePlugin {
 public:
  bool pure() const override { return true; }
  const char* name() const override { return "GpuClustering"; }
  std::optional<NodeScore> score(const Pod& pod, const NodeState& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    if (pod.num_gpu == 0) return NodeScore{0, std::move(*gpus)};
    const auto used = static_cast<int64_t>(kGpuNorm) - n.gpu_free_total();
    double s = static_cast<double>(25 * used / static_cast<int64_t>(kGpuNorm));
    const std::string tag = pod.gpu_tag();
    if (n.gpu_pods_by_tag.empty()) {
      s += 25;
    } else if (n.gpu_pods_by_tag.contains(tag)) {
      s += n.gpu_pods_by_tag.size() == 1 ? 75 : 50;
    }
    return NodeScore{s, std::move(*gpus)};
  }
};

// Prefer GPUs already shared, then free GPUs on nodes already in use, then idle nodes.
class GpuPacking : public ScorePlugin {
 public:
  bool pure() const override { return true; }
  const char* name() const override { return "GpuPacking"; }
  std::optional<NodeScore> score(const Pod& pod, const NodeState& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    if (pod.num_gpu == 0) return NodeScore{0, std::move(*gpus)};
    const int free_gpus = n.full_free_gpus();
    if (free_gpus == n.gpus()) return NodeScore{double(std::max(33 - free_gpus, free_gpus)), std::move(*gpus)};
    if (pod.sharing() && n.gpu_free[(*gpus)[0]] < kMilli) {
      const int64_t free_pct = n.gpu_free[(*gpus)[0]] * 100 / kMilli;  // of the GPU it lands on
      return NodeScore{double(std::max<int64_t>(100 - free_pct / 10, 50)), std::move(*gpus)};
    }
    const int taken = pod.sharing() ? 1 : pod.num_gpu;  // fully free GPUs this pod uses
    return NodeScore{double(std::max(50 - taken, 33)), std::move(*gpus)};
  }
};

// Least weighted leftover of CPU and GPU after placement (0.5 each).
double leftover(const Pod& pod, const NodeState& n) {
  return 0.5 * static_cast<double>(n.cpu_free - pod.cpu_milli) / kCpuNorm +
         0.5 * (static_cast<double>(n.gpu_free_total()) - static_cast<double>(pod.gpu_request())) / kGpuNorm;
}

class BestFit : public ScorePlugin {
 public:
  bool pure() const override { return true; }
  const char* name() const override { return "BestFit"; }
  std::optional<NodeScore> score(const Pod& pod, const NodeState& n, std::mt19937_64&) override {
    auto gpus = default_gpus(pod, n);
    if (!gpus) return std::nullopt;
    return NodeScore{std::trunc((1.0 - leftover(pod, n)) * 100.0), std::move(*gpus)};
  }
};

// Fragmentation Gradient Descent: the placement (node and GPU) that grows expected fragmentation
// least, scored int(100 * sigmoid(-dF / 1000)); within a node the first GPU with the best score.
// FGDPack (ours) scores the same fragmentation change at half the resolution (50 levels), and
// breaks ties towards the node left with the least free GPU, before the framework's tie-break:
// near-equal placements consolidate GPUs instead of falling to node order. When multi-GPU pods
// carry 20% or more of the target workload's GPU demand, whole idle nodes matter more than
// consolidation and it scores exactly as FGD.
class Fgd : public ScorePlugin {
 public:
  Fgd(const SchedulingContext& ctx, bool pack) : workload_(ctx.workload), pack_(pack && multi_gpu_share() < 0.2) {}
  const char* name() const override { return pack_ ? "FGDPack" : "FGD"; }
  bool pure() const override { return true; }  // the caches below hold values, never decide
  std::optional<NodeScore> score(const Pod& pod, const NodeState& n, std::mt19937_64&) override {
    const std::vector<char>& mask = mask_for(n.gpu_model);
    // F_n now. A Cluster's node versions are unique per node state (never 0), so an entry with
    // this version holds it; a node outside a Cluster (version 0) is computed every time.
    Cached scratch;
    Cached& cached = n.version == 0 ? scratch : before_[n.version & (before_.size() - 1)];
    if (n.version == 0 || cached.version != n.version) cached = {n.version, fragmentation(n, workload_, &mask)};
    std::optional<NodeScore> best;
    // Scores placing the pod on `gpus`; the first best candidate wins.
    auto consider = [&](const std::vector<int>& gpus) {
      const double delta = fragmentation_after(n, pod, gpus, workload_, &mask) - cached.value;
      const double sigmoid = 1.0 / (1.0 + std::exp(delta / 1000.0));
      double s = std::trunc(100.0 * sigmoid);
      if (pack_) {
        // Half the resolution: fragmentation changes within ~2 points count as equal, and among
        // those the placement leaving the node the least free GPU wins (GPUs consolidate).
        const double gpu_left =
            (static_cast<double>(n.gpu_free_total()) - static_cast<double>(pod.gpu_request())) / kGpuNorm;
        s = std::trunc(50.0 * sigmoid) + (1.0 - gpu_left) * 1e-3;
      }
      if (!best || s > best->score) best = NodeScore{s, gpus};
    };
    if (pod.sharing()) {
      // GPUs with equal free shares score equally: the first of each is enough (ties go to it).
      for (int g = 0; g < n.gpus(); ++g) {
        const int free = n.gpu_free[g];
        if (free < pod.gpu_milli) continue;
        if (std::find(n.gpu_free.begin(), n.gpu_free.begin() + g, free) != n.gpu_free.begin() + g) continue;
        one_gpu_.assign(1, g);
        consider(one_gpu_);
      }
    } else if (auto gpus = default_gpus(pod, n)) {
      consider(*gpus);
    }
    return best;
  }

 private:
  // Share of the target workload's GPU demand that asks for several whole GPUs.
  double multi_gpu_share() const {
    double all = 0, multi = 0;
    for (const auto& m : workload_) {
      const double demand = m.popularity * (m.num_gpu == 1 ? m.gpu_milli : static_cast<double>(m.num_gpu) * kMilli);
      all += demand;
      if (m.num_gpu >= 2) multi += demand;
    }
    return all > 0 ? multi / all : 0;
  }

  // The shapes allowed on GPU model `model` (a cluster has a handful of models: a linear search).
  const std::vector<char>& mask_for(const std::string& model) {
    for (const auto& [m, mask] : masks_) {
      if (m == model) return mask;
    }
    masks_.emplace_back(model, allowed_shapes(workload_, model));
    return masks_.back().second;
  }

  std::vector<TaskShape> workload_;
  bool pack_;
  struct Cached {
    uint64_t version = 0;  // 0: empty (versions start at 1)
    double value = 0;
  };
  // F_n by node version, direct-mapped (a collision recomputes): 256 KiB, one probe.
  std::vector<Cached> before_ = std::vector<Cached>(16384);
  std::vector<int> one_gpu_;  // score()'s scratch
  std::deque<std::pair<std::string, std::vector<char>>> masks_;  // GPU model -> shapes allowed on it (stable addresses)
};

}  // namespace

std::string FitStatus::message(const NodeState& node) const {
  switch (code) {
    case FitCode::kFits:
      return "";
    case FitCode::kNodeAffinity:
      return "node(s) didn't match Pod's node affinity/selector";
    case FitCode::kUnschedulable:
      return "node(s) were unschedulable";
    case FitCode::kUntoleratedTaint: {
      if (taint < 0 || static_cast<size_t>(taint) >= node.taints.size()) return "node(s) had untolerated taint";
      const Taint& t = node.taints[static_cast<size_t>(taint)];
      return fmt::format("node(s) had untolerated taint {{{}: {}}}", t.key, t.value);
    }
    case FitCode::kGpuModel:
      return "GPU model mismatch";
    case FitCode::kInsufficient:
      return fmt::format("Insufficient {}", resource);
    case FitCode::kGpuShare:
      return "insufficient GPU share";
    case FitCode::kNoGpuPlacement:
      return "no placement on the node's GPUs";
  }
  return "";
}

FitStatus run_filters(std::span<const std::unique_ptr<FilterPlugin>> filters, const Pod& pod, const NodeState& node) {
  for (const auto& f : filters) {
    FitStatus s = f->filter(pod, node);
    if (!s.fits()) return s;
  }
  return {};
}

FitReport explain_fit(const Pod& pod, const Cluster& cluster, std::span<const std::unique_ptr<FilterPlugin>> filters) {
  FitReport r;
  r.outcome.nodes = cluster.nodes().size();
  r.status.reserve(cluster.nodes().size());
  ReasonTally tally;
  for (const NodeState& node : cluster.nodes()) {
    r.status.push_back(run_filters(filters, pod, node));
    const FitStatus& st = r.status.back();
    if (st.fits()) {
      ++r.outcome.feasible;
    } else {
      tally.add(st, node);
    }
  }
  tally.into(r.outcome.reasons);
  return r;
}

FitReport explain_fit(const Pod& pod, const Cluster& cluster) { return explain_fit(pod, cluster, default_filters()); }

std::string Outcome::message() const {
  const size_t available = placement ? feasible : 0;
  std::vector<std::pair<int, std::string>> sorted;
  for (const auto& [r, n] : reasons) sorted.emplace_back(n, r);
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out = fmt::format("{}/{} nodes are available", available, nodes);
  for (size_t i = 0; i < sorted.size(); ++i) {
    out += fmt::format("{} {} {}", i == 0 ? ":" : ",", sorted[i].first, sorted[i].second);
  }
  return out + ".";
}

Framework::Framework(std::vector<std::unique_ptr<FilterPlugin>> filters, std::unique_ptr<ScorePlugin> score,
                     TieBreak tie_break)
    : filters_(std::move(filters)),
      score_(std::move(score)),
      tie_break_(tie_break),
      default_filters_(are_default_filters(filters_)) {}

// ---- the incremental path (see Framework's comment) ----

namespace {

constexpr double kNone = -std::numeric_limits<double>::infinity();  // no placement on the node
constexpr uint32_t kScored = 0;       // status: passed the filters and scored
constexpr uint32_t kNoPlacement = 1;  // status: passed the filters, the plugin found no GPUs
constexpr size_t kMaxShapes = 512;

void put(std::string& out, int64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
void put(std::string& out, const std::string& v) {
  put(out, static_cast<int64_t>(v.size()));
  out += v;
}

// Everything of a pod the filters and score plugins read.
std::string shape_key(const Pod& p) {
  std::string k;
  put(k, p.cpu_milli);
  put(k, p.memory_mib);
  put(k, p.num_gpu);
  put(k, p.gpu_milli);
  put(k, static_cast<int64_t>(p.gpu_models.size()));
  for (const auto& m : p.gpu_models) put(k, m);
  put(k, static_cast<int64_t>(p.node_selector.size()));
  for (const auto& [a, b] : p.node_selector) {
    put(k, a);
    put(k, b);
  }
  put(k, static_cast<int64_t>(p.tolerations.size()));
  for (const auto& t : p.tolerations) {
    put(k, t.key);
    put(k, t.op);
    put(k, t.value);
    put(k, t.effect);
  }
  const auto put_requirements = [&](const std::vector<NodeSelectorRequirement>& rs) {
    put(k, static_cast<int64_t>(rs.size()));
    for (const auto& r : rs) {
      put(k, r.key);
      put(k, r.op);
      put(k, static_cast<int64_t>(r.values.size()));
      for (const auto& v : r.values) put(k, v);
    }
  };
  put(k, static_cast<int64_t>(p.required_affinity.size()));
  for (const auto& term : p.required_affinity) {
    put_requirements(term.match_expressions);
    put_requirements(term.match_fields);
  }
  return k;
}

// Everything of a node the filters and score plugins read (all but its name and version).
std::string state_key(const NodeState& n) {
  std::string k;
  put(k, n.cpu_milli);
  put(k, n.memory_mib);
  put(k, n.gpu_model);
  put(k, static_cast<int64_t>(n.labels.size()));
  for (const auto& [a, b] : n.labels) {
    put(k, a);
    put(k, b);
  }
  put(k, static_cast<int64_t>(n.taints.size()));
  for (const auto& t : n.taints) {
    put(k, t.key);
    put(k, t.value);
    put(k, t.effect);
  }
  put(k, n.unschedulable ? 1 : 0);
  put(k, static_cast<int64_t>(n.gpu_free.size()));
  for (int g : n.gpu_free) put(k, g);
  put(k, n.cpu_free);
  put(k, n.memory_free);
  put(k, static_cast<int64_t>(n.gpu_pods_by_tag.size()));
  for (const auto& [tag, c] : n.gpu_pods_by_tag) {
    put(k, tag);
    put(k, c);
  }
  put(k, n.pods);
  return k;
}

// One pod shape's view of the cluster: each node's score under a max-tree of 8 children per
// inner entry whose leaves are the nodes in cluster order, and each node's status (kScored,
// kNoPlacement or a filter reason's id; see `room`). Leaves and inner entries are stored in
// 64-byte blocks of 8 (unused slots kNone), so a block's maximum reads one cache line and a path
// is 5 lines at 12,000 nodes: the refresh is bound by memory, not arithmetic.
struct ShapeCache {
  static constexpr size_t kFan = 8;
  struct alignas(64) Block {
    std::array<double, kFan> v;
    double max() const {
      double m = v[0];
      for (size_t k = 1; k < kFan; ++k) m = std::max(m, v[k]);  // std::max: the first of equals
      return m;
    }
  };
  uint64_t seq = 0;   // the Cluster::change_seq() it reflects
  uint64_t used = 0;  // Index::clock at its last use (LRU)
  size_t nodes = 0;
  // levels[0]: the leaves (node i: block i / 8, slot i % 8); levels[k][b / 8].v[b % 8]: the
  // maximum of levels[k - 1]'s block b; the last level has one block, its slot 0 the root.
  std::vector<std::vector<Block>> levels;
  // Per node without default filters (the leaf's status; empty otherwise: there `room` says it).
  std::vector<uint32_t> status;
  std::vector<int64_t> counts;  // nodes per status id
  // Per node, with default filters, its verdict at its last evaluation, which is its status:
  // kFixed when a filter rejected it for what never changes (counted when the tree was built),
  // kScored/kNoPlacement when it passed the filters, else the ResourceFilter::Room check it
  // failed. A changed node that fails the same check again costs this byte (in cache) and not
  // its leaf. (Leaving a newly rejected node's leaf stale until it surfaced in best() was tried:
  // packing policies put just-filled nodes on top, so most stale leaves surfaced anyway, each
  // with a descent more.) Without default filters every verdict is kFixed and `status` holds
  // the status.
  static constexpr uint8_t kFixed = 0xff;
  static constexpr uint8_t kFitsScored = 0;  // ResourceFilter::Room::kFits, scored
  static constexpr uint8_t kFitsNoPlacement = ResourceFilter::kRoomValues;
  std::vector<uint8_t> room;

  double& at(size_t level, size_t i) { return levels[level][i / kFan].v[i % kFan]; }
  double at(size_t level, size_t i) const { return levels[level][i / kFan].v[i % kFan]; }
  double leaf(size_t i) const { return at(0, i); }

  // Sizes the tree for n nodes, every leaf kNone; `statuses`: keep per-node statuses.
  void reset(size_t n, bool statuses) {
    nodes = n;
    Block none;
    none.v.fill(kNone);
    levels.clear();
    size_t entries = n;  // of the level being added
    levels.emplace_back((entries + kFan - 1) / kFan, none);
    while (entries > 1) {  // up to a level of one entry, the root
      entries = levels.back().size();
      levels.emplace_back((entries + kFan - 1) / kFan, none);
    }
    status.assign(statuses ? n : 0, kScored);
    room.assign(n, kFixed);
  }
  // Recomputes every inner entry from the leaves (after filling them).
  void rebuild() {
    for (size_t k = 1; k < levels.size(); ++k) {
      for (size_t b = 0; b < levels[k - 1].size(); ++b) at(k, b) = levels[k - 1][b].max();
    }
  }
  void count(uint32_t was, uint32_t now) {
    if (was == now) return;
    if (counts.size() <= now) counts.resize(now + 1, 0);
    --counts[was];
    ++counts[now];
  }
  // Without default filters: node i's status and score.
  void set(size_t i, uint32_t st, double score) {
    count(status[i], st);
    status[i] = st;
    set_score(i, score);
  }
  void set_score(size_t i, double score) {
    const double old = at(0, i);
    if (old == score) return;  // unchanged (the common case)
    at(0, i) = score;
    size_t b = i / kFan;  // the block of level k - 1 whose maximum is entry b of level k
    if (old < score) {
      // Risen: every entry on the path below the new score becomes it.
      for (size_t k = 1; k < levels.size() && at(k, b) < score; ++k, b /= kFan) at(k, b) = score;
      return;
    }
    // Fallen: an entry changes only where the old score was its maximum and no other child has it.
    for (size_t k = 1; k < levels.size() && at(k, b) == old; ++k, b /= kFan) {
      const double m = levels[k - 1][b].max();
      if (m == at(k, b)) return;
      at(k, b) = m;
    }
  }
  // The first node in cluster order with the highest score, or nullopt.
  std::optional<size_t> best() const {
    if (nodes == 0 || levels.back()[0].v[0] == kNone) return std::nullopt;
    size_t j = 0;  // entry of level k
    for (size_t k = levels.size() - 1; k > 0; --k) {
      const double v = at(k, j);
      const Block& children = levels[k - 1][j];
      size_t c = 0;
      while (children.v[c] != v) ++c;
      j = j * kFan + c;
    }
    return j;
  }
};

}  // namespace

// Owned by one Framework; single-threaded like it.
struct Framework::Index {
  uint64_t cluster_id = 0;
  size_t nodes = 0;
  std::vector<std::string> reasons{"", "no placement on the node's GPUs"};  // by status id
  std::unordered_map<std::string, uint32_t> reason_ids;
  // Node states interned: equal state_key, equal id. Ids restart (the map is cleared and every
  // node's id recomputed) when the map passes 2 x nodes + 1024 entries, bounding its memory.
  std::unordered_map<std::string, uint32_t> state_ids;
  std::vector<uint32_t> node_state;  // state id per node, valid while versions[i] == node.version
  std::vector<uint64_t> versions;    // 0: not computed
  std::vector<uint64_t> state_stamps;                  // per state id: build that evaluated it
  std::vector<std::pair<uint32_t, double>> state_values;  // per state id: that evaluation
  uint64_t build = 0;
  uint64_t clock = 0;
  std::unordered_map<std::string, ShapeCache> shapes;
  std::mt19937_64 unused_rng;  // pure plugins never draw from it

  // The id of a filter status. A cluster's filters give few distinct statuses (the resource
  // filter's handful, one per untolerated taint text), so statuses with a fixed text are found by
  // comparison, without formatting; taints by their text, the first ones by comparison too.
  std::vector<std::pair<FitStatus, uint32_t>> fixed_ids;
  // Per status id: a rejection by what assign/release never change (labels, taints, cordon, GPU
  // model) under default filters: such a node keeps its status for the shape, changed or not.
  std::vector<char> unchanging{0, 0};
  uint32_t status_id(const FitStatus& s, const NodeState& node) {
    uint32_t id = 0;
    if (s.code != FitCode::kUntoleratedTaint) {
      for (const auto& [st, known] : fixed_ids) {
        if (st == s) return known;
      }
      id = reason_id(s.message(node));
      fixed_ids.emplace_back(s, id);
    } else {
      id = reason_id(s.message(node));
    }
    if (unchanging.size() <= id) unchanging.resize(id + 1, 0);
    unchanging[id] = s.code != FitCode::kInsufficient && s.code != FitCode::kGpuShare;
    return id;
  }
  // The status of a node whose ShapeCache::room verdict is `v` (not kFixed).
  uint32_t verdict_status(uint8_t v) {
    if (v == ShapeCache::kFitsScored) return kScored;
    if (v == ShapeCache::kFitsNoPlacement) return kNoPlacement;
    return room_status_id(static_cast<ResourceFilter::Room>(v));
  }
  // status_id of ResourceFilter::status(r), looked up once per value.
  std::array<uint32_t, ResourceFilter::kRoomValues> room_ids = filled_room_ids();
  static std::array<uint32_t, ResourceFilter::kRoomValues> filled_room_ids() {
    std::array<uint32_t, ResourceFilter::kRoomValues> ids;
    ids.fill(UINT32_MAX);
    return ids;
  }
  uint32_t room_status_id(ResourceFilter::Room r) {
    uint32_t& id = room_ids[static_cast<size_t>(r)];
    if (id == UINT32_MAX) {
      static const NodeState kNoNode;  // the resource statuses name no taint
      id = status_id(ResourceFilter::status(r), kNoNode);
    }
    return id;
  }
  uint32_t reason_id(const std::string& r) {
    constexpr size_t kLinear = 16;
    for (size_t k = 2; k < std::min(reasons.size(), kLinear); ++k) {
      if (reasons[k] == r) return static_cast<uint32_t>(k);
    }
    if (reasons.size() < kLinear) {
      reasons.push_back(r);
      return static_cast<uint32_t>(reasons.size() - 1);
    }
    auto [it, added] = reason_ids.try_emplace(r, static_cast<uint32_t>(reasons.size()));
    if (added) reasons.push_back(r);
    return it->second;
  }
  uint32_t state(const Cluster& c, size_t i) {
    const uint64_t version = c.room(i).version;
    if (versions[i] != version) {
      auto [it, added] = state_ids.try_emplace(state_key(c.node(i)), static_cast<uint32_t>(state_ids.size()));
      node_state[i] = it->second;
      versions[i] = version;
    }
    return node_state[i];
  }
  // The nodes that changed, most recent first (a list through newer/older), with the change
  // sequence number of each one's last change: the nodes changed since seq S are the list's
  // prefix with last_change >= S, each once however often it changed. catch_up() reads the log up
  // to now (each entry once over the run); when the log was trimmed past `logged`, every node
  // counts as changed just before now.
  static constexpr uint32_t kNil = UINT32_MAX;
  std::vector<uint64_t> last_change;
  std::vector<uint32_t> newer, older;
  uint32_t newest = kNil;
  uint64_t logged = 0;
  void reset_changes(uint64_t now) {
    last_change.assign(nodes, 0);
    newer.assign(nodes, kNil);
    older.assign(nodes, kNil);
    newest = kNil;
    logged = now;
  }
  void touch(uint32_t i, uint64_t seq) {
    if (newest != i) {
      if (newer[i] != kNil || older[i] != kNil) {  // linked: unlink (i is not the head)
        older[newer[i]] = older[i];
        if (older[i] != kNil) newer[older[i]] = newer[i];
      }
      newer[i] = kNil;
      older[i] = newest;
      if (newest != kNil) newer[newest] = i;
      newest = i;
    }
    last_change[i] = seq;
  }
  void catch_up(const Cluster& c) {
    const uint64_t now = c.change_seq();
    if (logged == now) return;
    if (const auto ch = c.changes_since(logged)) {
      for (size_t k = 0; k < ch->size(); ++k) touch((*ch)[k], logged + k);
    } else {
      for (size_t i = 0; i < nodes; ++i) touch(static_cast<uint32_t>(i), now - 1);
    }
    logged = now;
  }
  // Calls visit(i) once for every node changed since `since` (after catch_up).
  template <typename Visit>
  void each_changed(uint64_t since, Visit&& visit) {
    for (uint32_t i = newest; i != kNil && last_change[i] >= since; i = older[i]) visit(i);
  }
  void trim_states() {
    if (state_ids.size() <= 2 * nodes + 1024) return;
    state_ids.clear();
    versions.assign(nodes, 0);
  }
};

Framework::~Framework() = default;
Framework::Framework(Framework&&) noexcept = default;
Framework& Framework::operator=(Framework&&) noexcept = default;

Outcome Framework::schedule_indexed(const Pod& pod, Cluster& cluster, std::mt19937_64& rng) {
  if (!index_) index_ = std::make_unique<Index>();
  Index& ix = *index_;
  const size_t n = cluster.nodes().size();
  if (ix.cluster_id != cluster.id() || ix.nodes != n) {
    ix.shapes.clear();
    ix.cluster_id = cluster.id();
    ix.nodes = n;
    ix.state_ids.clear();
    ix.node_state.assign(n, 0);
    ix.versions.assign(n, 0);
    ix.reset_changes(cluster.change_seq());
  }
  // A node's status and score for this pod, exactly as the full scan computes them.
  auto evaluate = [&](size_t i) -> std::pair<uint32_t, double> {
    const NodeState& node = cluster.node(i);
    const FitStatus st = run_filters(filters_, pod, node);
    if (!st.fits()) return {ix.status_id(st, node), kNone};
    auto s = score_->score(pod, node, ix.unused_rng);
    if (!s) return {kNoPlacement, kNone};
    return {kScored, s->score};
  };
  auto [it, added] = ix.shapes.try_emplace(shape_key(pod));
  ShapeCache& sc = it->second;
  sc.used = ++ix.clock;
  ix.catch_up(cluster);
  const auto changed = added ? std::nullopt : cluster.changes_since(sc.seq);
  if (!changed) {
    // Build: each distinct node state is evaluated once.
    sc.reset(n, !default_filters_);
    sc.counts.assign(ix.reasons.size(), 0);
    ix.trim_states();
    ++ix.build;
    for (size_t i = 0; i < n; ++i) {
      const uint32_t id = ix.state(cluster, i);
      if (id >= ix.state_stamps.size()) {
        ix.state_stamps.resize(ix.state_ids.size(), 0);
        ix.state_values.resize(ix.state_ids.size());
      }
      if (ix.state_stamps[id] != ix.build) {
        ix.state_stamps[id] = ix.build;
        ix.state_values[id] = evaluate(i);
      }
      const auto [st, score] = ix.state_values[id];
      if (sc.counts.size() <= st) sc.counts.resize(st + 1, 0);
      ++sc.counts[st];
      sc.at(0, i) = score;
      if (!default_filters_) sc.status[i] = st;
      if (default_filters_ && !ix.unchanging[st]) {
        sc.room[i] = st == kScored        ? ShapeCache::kFitsScored
                     : st == kNoPlacement ? ShapeCache::kFitsNoPlacement
                                          : static_cast<uint8_t>(ResourceFilter::room_fit(pod, cluster.room(i)));
      }
    }
    sc.rebuild();
  } else if (default_filters_) {
    // A changed node rejected for what never changes keeps its status; one that passed those
    // filters still does, and only the resource checks (on the packed room) and the score remain.
    using Room = ResourceFilter::Room;
    ix.each_changed(sc.seq, [&](size_t i) {
      uint8_t& last = sc.room[i];
      if (last == ShapeCache::kFixed) return;
      const Room room = ResourceFilter::room_fit(pod, cluster.room(i));
      if (room != Room::kFits) {
        if (static_cast<uint8_t>(room) == last) return;  // the same rejection
        sc.count(ix.verdict_status(last), ix.room_status_id(room));
        last = static_cast<uint8_t>(room);
        sc.set_score(i, kNone);
        return;
      }
      auto s = score_->score(pod, cluster.node(i), ix.unused_rng);
      const uint8_t now = s ? ShapeCache::kFitsScored : ShapeCache::kFitsNoPlacement;
      sc.count(ix.verdict_status(last), ix.verdict_status(now));
      last = now;
      sc.set_score(i, s ? s->score : kNone);
    });
  } else {
    ix.each_changed(sc.seq, [&](size_t i) {
      const auto [st, score] = evaluate(i);
      sc.set(i, st, score);
    });
  }
  sc.seq = cluster.change_seq();

  Outcome out;
  out.nodes = n;
  for (size_t st = 0; st < sc.counts.size(); ++st) {
    if (st == kScored || st == kNoPlacement) out.feasible += static_cast<size_t>(sc.counts[st]);
    if (st != kScored && sc.counts[st] > 0) out.reasons[ix.reasons[st]] = static_cast<int>(sc.counts[st]);
  }
  const auto best = sc.best();
  if (ix.shapes.size() > kMaxShapes) {
    auto lru = ix.shapes.end();
    for (auto s = ix.shapes.begin(); s != ix.shapes.end(); ++s) {
      if (&s->second != &sc && (lru == ix.shapes.end() || s->second.used < lru->second.used)) lru = s;
    }
    ix.shapes.erase(lru);
  }
  if (!best) return out;
  auto s = score_->score(pod, cluster.node(*best), rng);  // pure: the GPUs of the cached score
  if (!s) return out;  // unreachable for a pure plugin: it scored this node a moment ago
  Placement p{*best, std::move(s->gpus)};
  cluster.assign(pod, p);
  for (const auto& r : reserve_) r->reserve(pod, p, cluster);
  out.placement = std::move(p);
  return out;
}

Outcome Framework::schedule(const Pod& pod, Cluster& cluster, std::mt19937_64& rng, const std::vector<char>* allowed) {
  if (allowed != nullptr && allowed->size() != cluster.nodes().size()) allowed = nullptr;
  // Node states are interned without names: a pod whose affinity reads them scans every node.
  if (incremental_ && tie_break_ == TieBreak::kFirst && score_->pure() && !pod.affinity_reads_node_name()) {
    Outcome out = schedule_indexed(pod, cluster, rng);
    // The first best node of the whole cluster is also the first best among the allowed ones when
    // it is one of them; otherwise (or to count reasons over the allowed nodes only) scan them.
    if (allowed == nullptr || (out.placement && (*allowed)[out.placement->node])) return out;
    if (out.placement) unreserve(pod, *out.placement, cluster);
  }
  Outcome out;
  feasible_.clear();
  ReasonTally tally;
  for (size_t i = 0; i < cluster.nodes().size(); ++i) {
    if (allowed != nullptr && !(*allowed)[i]) continue;
    ++out.nodes;
    const NodeState& n = cluster.node(i);
    const FitStatus st = run_filters(filters_, pod, n);
    if (st.fits()) {
      feasible_.push_back(i);
    } else {
      tally.add(st, n);
    }
  }
  tally.into(out.reasons);
  out.feasible = feasible_.size();
  if (feasible_.empty()) return out;
  score_->prepare(pod, cluster);
  scores_.assign(feasible_.size(), NodeScore{});
  std::vector<size_t> scored;
  double lo = 0, hi = 0;
  for (size_t k = 0; k < feasible_.size(); ++k) {
    auto s = score_->score(pod, cluster.node(feasible_[k]), rng);
    if (!s) {
      ++out.reasons[FitStatus{FitCode::kNoGpuPlacement, score_->name()}.message(cluster.node(feasible_[k]))];
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
    } else if (norm > best - 1e-9 && tie_break_ == TieBreak::kRandom &&
               std::uniform_int_distribution<int>(0, ties++)(rng) == 0) {
      chosen = k;
    }
  }
  Placement p{feasible_[chosen], std::move(scores_[chosen].gpus)};
  cluster.assign(pod, p);
  for (const auto& r : reserve_) r->reserve(pod, p, cluster);
  out.placement = std::move(p);
  return out;
}

void Framework::unreserve(const Pod& pod, const Placement& placement, Cluster& cluster) {
  for (const auto& r : reserve_) r->unreserve(pod, placement, cluster);
  cluster.release(pod, placement);
}

std::vector<std::unique_ptr<FilterPlugin>> default_filters() {
  std::vector<std::unique_ptr<FilterPlugin>> f;
  f.push_back(std::make_unique<NodeAffinityFilter>());
  f.push_back(std::make_unique<NodeSelectorFilter>());
  f.push_back(std::make_unique<NodeUnschedulableFilter>());
  f.push_back(std::make_unique<TaintFilter>());
  f.push_back(std::make_unique<ResourceFilter>());
  return f;
}

namespace {
bool are_default_filters(std::span<const std::unique_ptr<FilterPlugin>> filters) {
  const auto defaults = default_filters();
  if (filters.size() != defaults.size()) return false;
  for (size_t i = 0; i < filters.size(); ++i) {
    if (!filters[i] || typeid(*filters[i]) != typeid(*defaults[i])) return false;
  }
  return true;
}
}  // namespace

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
  return Framework(default_filters(), it->second(ctx), ctx.tie_break);
}

}  // namespace kgpu::sched
