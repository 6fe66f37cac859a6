// The MIG planner (gpu/mig_plan.h) against fixed layouts on a MIG-sized trace derived from openb
// (docs/mig.md, "Evaluation"), and its time on large clusters. The comparison is `kgpu sim
// --mig-layouts` (sim/mig_eval.h, where the trace mapping is described); this adds --scale-nodes.
//
// Usage: mig_plan_eval NODES.csv PODS.csv [--scale-nodes N] [--shares-only] [--time]
//   --scale-nodes N  repeat the nodes (and the pods in proportion) up to N nodes, for the time
//   --shares-only    only the pods asking a share of one GPU (where MIG sizes differ)
//   --time           arrivals and departures instead of every pod pending at once
#include <fmt/format.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "sim/mig_eval.h"
#include "sim/trace.h"

int main(int argc, char** argv) {
  using namespace kgpu;
  if (argc < 3) {
    std::cerr << "usage: mig_plan_eval NODES.csv PODS.csv [--scale-nodes N] [--shares-only] [--time]\n";
    return 2;
  }
  size_t scale_to = 0;
  bool shares_only = false, time_mode = false;
  for (int i = 3; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--scale-nodes" && i + 1 < argc) scale_to = std::strtoul(argv[++i], nullptr, 10);
    if (a == "--shares-only") shares_only = true;
    if (a == "--time") time_mode = true;
  }
  auto nodes = sim::load_nodes(argv[1]);
  auto pods = sim::load_pods(argv[2]);
  if (!nodes || !pods) {
    std::cerr << (nodes ? pods.error().message : nodes.error().message) << "\n";
    return 1;
  }
  std::vector<sched::NodeState> gpu_nodes;
  for (const auto& n : *nodes)
    if (!n.gpu_free.empty()) gpu_nodes.push_back(n);
  std::vector<sched::Pod> gpu_pods;
  for (const auto& p : *pods)
    if (p.num_gpu > 0 && (!shares_only || p.sharing())) gpu_pods.push_back(p);
  if (scale_to > gpu_nodes.size()) {
    const size_t base = gpu_nodes.size(), base_pods = gpu_pods.size();
    for (size_t k = 0; gpu_nodes.size() < scale_to; ++k) {
      auto copy = gpu_nodes[k % base];
      copy.name += fmt::format("-copy{}", k / base + 1);
      gpu_nodes.push_back(std::move(copy));
      if (k % base < base_pods) gpu_pods.push_back(gpu_pods[k % base_pods]);  // pods in proportion
    }
  }
  const auto ev = sim::evaluate_mig_layouts(gpu_nodes, gpu_pods, {time_mode, 1, 1});
  fmt::print("nodes {}, GPUs {}, GPU pods {}, MIG instances asked {} ({} mode)\n", ev.nodes, ev.gpus, ev.gpu_pods,
             ev.instances_asked, time_mode ? "time" : "instant");
  fmt::print("{:<14} {:>12} {:>10} {:>22}\n", "layout", "pods served", "of pods", "compute slices used");
  for (const auto& l : ev.layouts) {
    fmt::print("{:<14} {:>12} {:>9.1f}% {:>21.1f}%\n", l.layout, l.served,
               l.pods ? 100.0 * static_cast<double>(l.served) / static_cast<double>(l.pods) : 0.0,
               100 * l.slices_used);
  }
  std::string mix;
  for (const auto& [c, n] : ev.planner_choices) mix += fmt::format("{}{} x{}", mix.empty() ? "" : ", ", c, n);
  fmt::print("planner: {:.3f} s for {} nodes; chose {}\n", ev.plan_seconds, ev.nodes, mix);
  return 0;
}
