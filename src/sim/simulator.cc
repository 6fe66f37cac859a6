#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <queue>
#include <random>

#include "sched/framework.h"

namespace kgpu::sim {

std::string shape_name(const sched::Pod& p) {
  if (p.num_gpu == 0) return "CPU only";
  if (p.sharing()) return fmt::format("1x{:.2f} GPU", p.gpu_milli / 1000.0);
  return fmt::format("{} GPU", p.num_gpu);
}

namespace {

struct Recorder {
  RunResult& r;
  const sched::Cluster& c;
  const std::vector<sched::TaskShape>& workload;
  int next_percent = 1;

  void after_arrival(int64_t arrived_milli) {
    const double cap = static_cast<double>(c.gpu_capacity());
    if (cap <= 0) return;
    const double arrived = arrived_milli / cap;
    if (r.frag_ratio_at_90 < 0 && arrived >= 0.9)
      r.frag_ratio_at_90 = sched::cluster_fragmentation(c, workload).ratio();
    while (arrived * 100 >= next_percent) {
      r.curve.push_back({next_percent / 100.0, c.gpu_allocated() / cap});
      ++next_percent;
    }
    r.final_arrived = arrived;
    r.final_allocated = c.gpu_allocated() / cap;
    r.peak_allocated = std::max(r.peak_allocated, r.final_allocated);
  }
};

// FNV-1a, 64-bit, over the decisions of one run (see RunResult::placement_hash).
class PlacementHasher {
 public:
  void add(const sched::Pod& pod, const sched::Cluster& c, const std::optional<sched::Placement>& p) {
    bytes(pod.name.data(), pod.name.size());
    if (!p) {
      value(-1);
      return;
    }
    const std::string& node = c.node(p->node).name;
    bytes(node.data(), node.size());
    value(static_cast<int64_t>(p->gpus.size()));
    for (int g : p->gpus) value(g);
  }
  uint64_t hash() const { return h_; }

 private:
  void bytes(const void* data, size_t n) {
    const auto* b = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h_ ^= b[i];
      h_ *= 0x100000001b3ULL;
    }
    h_ ^= 0xff;  // separator, so that ("ab","c") and ("a","bc") differ
    h_ *= 0x100000001b3ULL;
  }
  void value(int64_t v) { bytes(&v, sizeof v); }
  uint64_t h_ = 0xcbf29ce484222325ULL;
};

// Counts an unscheduled pod under its shape and the reason most nodes gave.
void count_unscheduled(RunResult& r, const sched::Pod& pod, const sched::Outcome& out) {
  ++r.unscheduled_by_shape[shape_name(pod)];
  std::string reason = "no node";
  int most = -1;
  for (const auto& [why, n] : out.reasons) {
    if (n > most) {
      most = n;
      reason = why;
    }
  }
  ++r.unscheduled_by_reason[reason];
}

// The nodes in a per-seed order (ties under TieBreak::kFirst go to the first in it).
std::vector<sched::Node> seeded_order(const std::vector<sched::Node>& nodes, std::mt19937_64& rng) {
  std::vector<sched::Node> out = nodes;
  std::shuffle(out.begin(), out.end(), rng);
  return out;
}

// The framework a run uses: the policy, the trace's target workload, the tie-break.
Result<sched::Framework> framework_for(const std::vector<sched::Pod>& pods,
                                       const std::vector<sched::TaskShape>& workload, const RunOptions& o) {
  if (pods.empty()) return fail(ErrorCode::kInvalidArgument, "no pods to simulate");
  sched::SchedulingContext ctx;
  ctx.workload = workload;
  ctx.tie_break = o.tie_break;
  return sched::make_framework(o.policy, ctx);
}

}  // namespace

Result<RunResult> run_fgd_protocol(const std::vector<sched::Node>& nodes, const std::vector<sched::Pod>& pods,
                                   const RunOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto workload = sched::target_workload(pods);
  auto fw = framework_for(pods, workload, o);
  if (!fw) return std::unexpected(fw.error());
  std::mt19937_64 order_rng(o.seed);
  sched::Cluster cluster(seeded_order(nodes, order_rng));
  if (cluster.gpu_capacity() == 0) return fail(ErrorCode::kInvalidArgument, "the cluster has no GPUs");
  int64_t trace_demand = 0;
  for (const auto& p : pods) trace_demand += p.gpu_request();
  if (trace_demand == 0) return fail(ErrorCode::kInvalidArgument, "the pods ask for no GPUs: nothing to fill to a target");
  std::mt19937_64 sched_rng(o.seed * 0x9e3779b97f4a7c15ULL + 1);
  std::vector<size_t> order(pods.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), order_rng);

  RunResult r;
  r.policy = o.policy;
  r.seed = o.seed;
  Recorder rec{r, cluster, workload};
  PlacementHasher hasher;
  const auto target = static_cast<int64_t>(o.target_arrived * static_cast<double>(cluster.gpu_capacity()));
  int64_t arrived = 0;
  std::uniform_int_distribution<size_t> pick(0, pods.size() - 1);
  double last_progress = 0;
  // The shuffled trace, then pods drawn from it with replacement, until the next one would pass
  // the target (that one is not added).
  for (size_t k = 0;; ++k) {
    const sched::Pod& pod = pods[k < order.size() ? order[k] : order[pick(order_rng)]];
    if (arrived + pod.gpu_request() > target) break;
    ++r.arrivals;
    arrived += pod.gpu_request();
    auto out = fw->schedule(pod, cluster, sched_rng);
    hasher.add(pod, cluster, out.placement);
    if (out.placement) {
      ++r.scheduled;
    } else {
      count_unscheduled(r, pod, out);
    }
    rec.after_arrival(arrived);
    const double done = static_cast<double>(arrived) / static_cast<double>(target);
    if (o.progress && done - last_progress >= 0.01) {
      last_progress = done;
      o.progress(done);
    }
  }
  r.placement_hash = hasher.hash();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Result<RunResult> run_time_driven(const std::vector<sched::Node>& nodes, const std::vector<sched::Pod>& pods,
                                  const RunOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto workload = sched::target_workload(pods);
  auto fw = framework_for(pods, workload, o);
  if (!fw) return std::unexpected(fw.error());
  std::mt19937_64 rng(o.seed);
  sched::Cluster cluster(seeded_order(nodes, rng));
  if (cluster.gpu_capacity() == 0) return fail(ErrorCode::kInvalidArgument, "the cluster has no GPUs");
  std::vector<size_t> order(pods.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pods[a].creation < pods[b].creation; });

  RunResult r;
  r.policy = o.policy;
  r.seed = o.seed;
  Recorder rec{r, cluster, workload};
  PlacementHasher hasher;
  using Departure = std::pair<int64_t, size_t>;  // (time, pod index)
  std::priority_queue<Departure, std::vector<Departure>, std::greater<>> departures;
  std::map<size_t, sched::Placement> placed;
  int64_t arrived = 0;
  for (size_t idx : order) {
    const sched::Pod& pod = pods[idx];
    while (!departures.empty() && departures.top().first <= pod.creation) {
      const size_t gone = departures.top().second;
      departures.pop();
      fw->unreserve(pods[gone], placed[gone], cluster);
      placed.erase(gone);
    }
    ++r.arrivals;
    arrived += pod.gpu_request();
    auto out = fw->schedule(pod, cluster, rng);
    hasher.add(pod, cluster, out.placement);
    if (out.placement) {
      ++r.scheduled;
      placed[idx] = *out.placement;
      if (pod.deletion) departures.emplace(*pod.deletion, idx);
    } else {
      count_unscheduled(r, pod, out);
    }
    rec.after_arrival(arrived);
  }
  r.placement_hash = hasher.hash();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace kgpu::sim
