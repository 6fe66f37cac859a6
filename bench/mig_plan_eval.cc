// The MIG planner (gpu/mig_plan.h) against fixed layouts on a MIG-sized trace derived from openb
// (docs/mig.md, "Evaluation"), and its time on large clusters.
//
// The openb trace has no MIG GPUs, so its GPU nodes are taken as H100-80GB nodes with the same
// GPU count, and each GPU pod's request becomes MIG instances: a share of one GPU becomes the
// smallest profile with at least as many compute sevenths (1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb,
// else 7g.80gb); n whole GPUs become n x 7g.80gb. Every pod is pending at once (the instant after
// a layout is chosen). Three ways to lay out every node:
//   all-balanced  NVIDIA's balanced layout everywhere
//   all-1g        all-1g.10gb everywhere
//   planner       per node the config plan_configs chooses among NVIDIA's default names
// Then pods are served in trace order, each on the first node whose free instances hold all of
// it. Reported: pods served, GPU pods, compute slices used of all, and the planner's time.
//
// Usage: mig_plan_eval NODES.csv PODS.csv [--scale-nodes N] [--shares-only]
//   --scale-nodes N  repeat the nodes (and the pods in proportion) up to N nodes, for the time
//   --shares-only    only the pods asking a share of one GPU (where MIG sizes differ)
#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "gpu/mig_plan.h"
#include "sim/trace.h"

namespace {

using namespace kgpu;
namespace mig = gpu::mig;

std::vector<std::string> instances(const sched::Pod& p) {
  if (p.num_gpu <= 0) return {};
  if (p.num_gpu == 1 && p.gpu_milli < sched::kMilli) {
    const int sevenths = (p.gpu_milli * 7 + sched::kMilli - 1) / sched::kMilli;
    static const char* kBySevenths[] = {"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb", "7g.80gb", "7g.80gb"};
    return {kBySevenths[std::clamp(sevenths, 1, 7)]};
  }
  return std::vector<std::string>(static_cast<size_t>(p.num_gpu), "7g.80gb");
}

struct Outcome {
  size_t served = 0;
  unsigned long used_slices = 0, total_slices = 0;
};

// Serves `pods` in order on nodes whose free instances are `free` (per node: profile -> count).
Outcome serve(std::vector<std::map<std::string, unsigned>> free, const std::vector<std::vector<std::string>>& pods,
              unsigned long total_slices) {
  Outcome o;
  o.total_slices = total_slices;
  for (const auto& want : pods) {
    std::map<std::string, unsigned> need;
    for (const auto& p : want) ++need[p];
    for (auto& node : free) {
      bool fits = true;
      for (const auto& [p, n] : need) fits = fits && node[p] >= n;
      if (!fits) continue;
      for (const auto& [p, n] : need) {
        node[p] -= n;
        o.used_slices += n * mig::profile_slices(p);
      }
      ++o.served;
      break;
    }
  }
  return o;
}

std::map<std::string, unsigned> layout(const mig::ConfigFile& f, const std::string& name, unsigned gpus) {
  std::map<std::string, unsigned> out;
  for (const auto& [p, n] : f.configs.at(name)[0].profiles) out[p] += n * gpus;
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: mig_plan_eval NODES.csv PODS.csv [--scale-nodes N]\n";
    return 2;
  }
  size_t scale_to = 0;
  bool shares_only = false;
  for (int i = 3; i < argc; ++i) {
    if (std::string(argv[i]) == "--scale-nodes" && i + 1 < argc) scale_to = std::strtoul(argv[++i], nullptr, 10);
    if (std::string(argv[i]) == "--shares-only") shares_only = true;
  }
  auto nodes = sim::load_nodes(argv[1]);
  auto pods = sim::load_pods(argv[2]);
  if (!nodes || !pods) {
    std::cerr << (nodes ? pods.error().message : nodes.error().message) << "\n";
    return 1;
  }
  const auto offers = mig::offers_for_memory(81559);
  const auto defaults = mig::default_configs(offers);
  std::vector<mig::PlanNode> plan_nodes;
  for (const auto& n : *nodes) {
    if (n.gpu_free.empty()) continue;
    mig::PlanNode pn;
    pn.name = n.name;
    for (size_t g = 0; g < n.gpu_free.size(); ++g) pn.gpus.push_back({static_cast<unsigned>(g), 0x233010DEu});
    pn.offers = offers;
    plan_nodes.push_back(std::move(pn));
  }
  std::vector<std::vector<std::string>> requests;
  std::vector<std::string> pending;
  for (const auto& p : *pods) {
    if (shares_only && !p.sharing()) continue;
    auto inst = instances(p);
    if (inst.empty()) continue;
    pending.insert(pending.end(), inst.begin(), inst.end());
    requests.push_back(std::move(inst));
  }
  if (scale_to > plan_nodes.size()) {
    const size_t base = plan_nodes.size(), base_requests = requests.size();
    for (size_t k = 0; plan_nodes.size() < scale_to; ++k) {
      auto copy = plan_nodes[k % base];
      copy.name += fmt::format("-copy{}", k / base + 1);
      plan_nodes.push_back(std::move(copy));
      if (k % base < base_requests) {
        // Pods in proportion: one copy of request k for node copy k.
        requests.push_back(requests[k % base_requests]);
        pending.insert(pending.end(), requests.back().begin(), requests.back().end());
      }
    }
  }
  unsigned long total_gpus = 0;
  for (const auto& n : plan_nodes) total_gpus += n.gpus.size();
  const unsigned long total_slices = total_gpus * mig::kComputeSlices;

  const auto t0 = std::chrono::steady_clock::now();
  const auto choices = mig::plan_configs(defaults, plan_nodes, pending);
  const double plan_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<std::map<std::string, unsigned>> balanced, one_g, planned;
  std::map<std::string, unsigned> chosen_counts;
  for (size_t i = 0; i < plan_nodes.size(); ++i) {
    const auto gpus = static_cast<unsigned>(plan_nodes[i].gpus.size());
    balanced.push_back(layout(defaults, "all-balanced", gpus));
    one_g.push_back(layout(defaults, "all-1g.10gb", gpus));
    planned.push_back(layout(defaults, choices[i].config, gpus));
    ++chosen_counts[choices[i].config];
  }
  fmt::print("nodes {}, GPUs {}, GPU pods {}, MIG instances asked {}\n", plan_nodes.size(), total_gpus, requests.size(),
             pending.size());
  fmt::print("{:<14} {:>12} {:>10} {:>22}\n", "layout", "pods served", "of pods", "compute slices used");
  for (const auto& [name, free] : {std::pair{"all-balanced", &balanced}, {"all-1g.10gb", &one_g}, {"planner", &planned}}) {
    const auto o = serve(*free, requests, total_slices);
    fmt::print("{:<14} {:>12} {:>9.1f}% {:>15} ({:.1f}%)\n", name, o.served, 100.0 * o.served / requests.size(),
               o.used_slices, 100.0 * o.used_slices / o.total_slices);
  }
  std::string mix;
  for (const auto& [c, n] : chosen_counts) mix += fmt::format("{}{} x{}", mix.empty() ? "" : ", ", c, n);
  fmt::print("planner: {:.3f} s for {} nodes; chose {}\n", plan_s, plan_nodes.size(), mix);
  return 0;
}
