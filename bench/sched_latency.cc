// Per-decision latency of sched::Framework::schedule on the live path: clusters of 1k, 10k and
// 50k nodes (openb's node mix, the node list replicated), filled to ~80% of GPU capacity with the
// default trace's pods, then churned in steady state: each step releases a random running pod and
// schedules a pod drawn from the trace; only schedule() is timed (steady_clock around the call).
// Policies BestFit and FGD, tie-break first (per-shape score trees) and random (a full scan of
// every node: kube-scheduler's reservoir draw depends on every tied node).
//
// Usage: sched_latency NODE_CSV POD_CSV [DECISIONS=3000] [SECONDS_PER_CASE=8] [NODES...]
// Prints one Markdown table row per case. Not a Google Benchmark: the numbers wanted are
// percentiles of single decisions, not a mean over batches.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "framework/framework.h"
#include "sim/trace.h"

namespace {

using namespace kgpu;

std::vector<sched::NodeState> replicate(const std::vector<sched::NodeState>& base, size_t count) {
  std::vector<sched::NodeState> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    sched::NodeState n = base[i % base.size()];
    n.name = fmt::format("{}-r{}", n.name, i / base.size());
    out.push_back(std::move(n));
  }
  return out;
}

struct Running {
  size_t pod;
  sched::Placement placement;
};

// Places trace pods (drawn at random) until `fill` of GPU capacity is allocated or 20 draws in a
// row fail; returns the pods running.
std::vector<Running> fill(sched::Framework& fw, sched::Cluster& c, const std::vector<sched::Pod>& pods, double target,
                          std::mt19937_64& rng) {
  std::vector<Running> running;
  std::uniform_int_distribution<size_t> pick(0, pods.size() - 1);
  int misses = 0;
  while (static_cast<double>(c.gpu_allocated()) < target * static_cast<double>(c.gpu_capacity()) && misses < 20) {
    const size_t i = pick(rng);
    auto out = fw.schedule(pods[i], c, rng);
    if (out.placement) {
      running.push_back({i, *out.placement});
      misses = 0;
    } else {
      ++misses;
    }
  }
  return running;
}

double at(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return 0;
  const auto rank = static_cast<size_t>(std::max(1.0, std::ceil(q * static_cast<double>(sorted.size()))));
  return sorted[std::min(rank, sorted.size()) - 1];
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    fmt::print(stderr, "usage: sched_latency NODE_CSV POD_CSV [DECISIONS] [SECONDS_PER_CASE] [NODES...]\n");
    return 2;
  }
  auto base = sim::load_nodes(argv[1]);
  auto pods = sim::load_pods(argv[2]);
  if (!base || !pods) {
    fmt::print(stderr, "sched_latency: {}\n", !base ? base.error().message : pods.error().message);
    return 1;
  }
  const int decisions = argc > 3 ? std::atoi(argv[3]) : 3000;
  const double budget_s = argc > 4 ? std::atof(argv[4]) : 8;
  std::vector<size_t> sizes;
  for (int k = 5; k < argc; ++k) sizes.push_back(static_cast<size_t>(std::atol(argv[k])));
  if (sizes.empty()) sizes = {1000, 10000, 50000};
  const auto workload = sched::target_workload(*pods);

  fmt::print("| nodes | policy | tie-break | decisions | p50 µs | p99 µs | mean µs | max µs | fill s |\n");
  fmt::print("|---|---|---|---|---|---|---|---|---|\n");
  for (size_t size : sizes) {
    const auto nodes = replicate(*base, size);
    for (const std::string policy : {"BestFit", "FGD"}) {
      // One filled cluster per size and policy (filled through the fast path), copied per case.
      sched::SchedulingContext first_ctx{workload, sched::TieBreak::kFirst};
      auto filler = sched::make_framework(policy, first_ctx);
      if (!filler) {
        fmt::print(stderr, "sched_latency: {}\n", filler.error().message);
        return 1;
      }
      std::mt19937_64 rng(1);
      sched::Cluster filled(nodes);
      const auto f0 = std::chrono::steady_clock::now();
      const auto running0 = fill(*filler, filled, *pods, 0.8, rng);
      const double fill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - f0).count();
      for (auto tie : {sched::TieBreak::kFirst, sched::TieBreak::kRandom}) {
        sched::SchedulingContext ctx{workload, tie};
        auto fw = sched::make_framework(policy, ctx);
        if (!fw) return 1;
        sched::Cluster c = filled;
        auto running = running0;
        std::mt19937_64 churn(2);
        std::uniform_int_distribution<size_t> pick(0, pods->size() - 1);
        std::vector<double> us;
        const auto start = std::chrono::steady_clock::now();
        // 100 unmeasured steps first (a framework's first decision per shape builds its tree).
        for (int step = 0; step < decisions + 100; ++step) {
          if (!running.empty()) {
            std::uniform_int_distribution<size_t> victim(0, running.size() - 1);
            const size_t v = victim(churn);
            fw->unreserve((*pods)[running[v].pod], running[v].placement, c);
            running[v] = running.back();
            running.pop_back();
          }
          const size_t i = pick(churn);
          const auto t0 = std::chrono::steady_clock::now();
          auto out = fw->schedule((*pods)[i], c, churn);
          const auto t1 = std::chrono::steady_clock::now();
          if (out.placement) running.push_back({i, *out.placement});
          if (step >= 100) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
          if (step >= 150 && std::chrono::duration<double>(t1 - start).count() > budget_s) break;
        }
        std::sort(us.begin(), us.end());
        double mean = 0;
        for (double x : us) mean += x;
        mean /= static_cast<double>(std::max<size_t>(1, us.size()));
        fmt::print("| {} | {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {:.0f} | {:.1f} |\n", size, policy,
                   tie == sched::TieBreak::kFirst ? "first" : "random", us.size(), at(us, 0.5), at(us, 0.99), mean,
                   us.empty() ? 0 : us.back(), fill_s);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
