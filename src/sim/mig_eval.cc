#include "sim/mig_eval.h"

#include <algorithm>
#include <chrono>

#include "gpu/mig_plan.h"

namespace kgpu::sim {

namespace mig = gpu::mig;

namespace {

constexpr uint64_t kH100MemoryMib = 81559;
constexpr unsigned kH100DeviceId = 0x233010DEu;

using Free = std::map<std::string, unsigned>;  // profile -> free instances of one node

// The node index that takes all of `want`, taking it; -1 when none.
int take(std::vector<Free>& free, const std::map<std::string, unsigned>& want) {
  for (size_t i = 0; i < free.size(); ++i) {
    bool fits = true;
    for (const auto& [p, n] : want) fits = fits && free[i][p] >= n;
    if (!fits) continue;
    for (const auto& [p, n] : want) free[i][p] -= n;
    return static_cast<int>(i);
  }
  return -1;
}

unsigned slices_of(const std::map<std::string, unsigned>& want) {
  unsigned s = 0;
  for (const auto& [p, n] : want) s += n * mig::profile_slices(p);
  return s;
}

Free layout(const mig::ConfigFile& f, const std::string& name, unsigned gpus) {
  Free out;
  const auto it = f.configs.find(name);
  if (it == f.configs.end() || it->second.empty()) return out;
  for (const auto& [p, n] : it->second[0].profiles) out[p] += n * gpus;
  return out;
}

struct Request {
  std::map<std::string, unsigned> want;
  int64_t creation = 0;
  std::optional<int64_t> deletion;
};

MigLayoutResult run_instant(const std::string& name, std::vector<Free> free, const std::vector<Request>& reqs,
                            unsigned long total_slices) {
  MigLayoutResult r{name, 0, reqs.size(), 0, 0};
  unsigned long used = 0;
  for (const auto& q : reqs) {
    if (take(free, q.want) < 0) continue;
    ++r.served;
    used += slices_of(q.want);
  }
  r.slices_used = total_slices ? static_cast<double>(used) / static_cast<double>(total_slices) : 0;
  r.peak_slices = r.slices_used;
  return r;
}

MigLayoutResult run_time(const std::string& name, std::vector<Free> free, const std::vector<Request>& reqs,
                         unsigned long total_slices) {
  MigLayoutResult r{name, 0, reqs.size(), 0, 0};
  // Events in time order; at one instant departures first.
  struct Ev {
    int64_t t;
    bool arrive;
    size_t req;
  };
  std::vector<Ev> evs;
  for (size_t i = 0; i < reqs.size(); ++i) {
    evs.push_back({reqs[i].creation, true, i});
    if (reqs[i].deletion) evs.push_back({*reqs[i].deletion, false, i});
  }
  std::stable_sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
    return a.t != b.t ? a.t < b.t : (!a.arrive && b.arrive);
  });
  std::vector<int> placed(reqs.size(), -1);
  unsigned long used = 0, peak = 0;
  double area = 0;
  const int64_t start = evs.empty() ? 0 : evs.front().t;
  int64_t last = start;
  for (const auto& e : evs) {
    area += static_cast<double>(used) * static_cast<double>(e.t - last);
    last = e.t;
    const auto& q = reqs[e.req];
    if (e.arrive) {
      placed[e.req] = take(free, q.want);
      if (placed[e.req] < 0) continue;
      ++r.served;
      used += slices_of(q.want);
      peak = std::max(peak, used);
    } else if (placed[e.req] >= 0) {
      for (const auto& [p, n] : q.want) free[static_cast<size_t>(placed[e.req])][p] += n;
      used -= slices_of(q.want);
    }
  }
  const double span = static_cast<double>(last - start);
  r.slices_used = span > 0 && total_slices ? area / span / static_cast<double>(total_slices) : 0;
  r.peak_slices = total_slices ? static_cast<double>(peak) / static_cast<double>(total_slices) : 0;
  return r;
}

}  // namespace

std::vector<std::string> mig_instances(const sched::Pod& p) {
  if (p.num_gpu <= 0) return {};
  if (p.num_gpu == 1 && p.gpu_milli < sched::kMilli) {
    const int sevenths = (p.gpu_milli * 7 + sched::kMilli - 1) / sched::kMilli;
    static const char* kBySevenths[] = {"1g.10gb", "1g.10gb", "2g.20gb", "3g.40gb",
                                        "4g.40gb", "7g.80gb", "7g.80gb", "7g.80gb"};
    return {kBySevenths[std::clamp(sevenths, 1, 7)]};
  }
  return std::vector<std::string>(static_cast<size_t>(p.num_gpu), "7g.80gb");
}

MigEvaluation evaluate_mig_layouts(const std::vector<sched::NodeState>& nodes, const std::vector<sched::Pod>& pods,
                                   const MigEvalOptions& o) {
  const bool time_mode = o.time_mode;
  const double speedup = o.arrival_speedup > 0 ? o.arrival_speedup : 1;
  const int copies = time_mode ? std::max(1, o.pod_copies) : 1;
  MigEvaluation ev;
  ev.time_mode = time_mode;
  const auto offers = mig::offers_for_memory(kH100MemoryMib);
  const auto defaults = mig::default_configs(offers);
  std::vector<mig::PlanNode> plan_nodes;
  for (const auto& n : nodes) {
    if (n.gpu_free.empty()) continue;
    mig::PlanNode pn;
    pn.name = n.name;
    for (size_t g = 0; g < n.gpu_free.size(); ++g) pn.gpus.push_back({static_cast<unsigned>(g), kH100DeviceId});
    pn.offers = offers;
    ev.gpus += n.gpu_free.size();
    plan_nodes.push_back(std::move(pn));
  }
  ev.nodes = plan_nodes.size();
  std::vector<Request> reqs;
  std::vector<std::string> pending;
  for (const auto& p : pods) {
    auto inst = mig_instances(p);
    if (inst.empty()) continue;
    Request q;
    for (const auto& i : inst) ++q.want[i];
    q.creation = time_mode ? static_cast<int64_t>(static_cast<double>(p.creation) / speedup) : p.creation;
    if (p.deletion) q.deletion = q.creation + (*p.deletion - p.creation);
    for (int k = 0; k < copies; ++k) {
      pending.insert(pending.end(), inst.begin(), inst.end());
      ev.instances_asked += inst.size();
      reqs.push_back(q);
    }
  }
  ev.gpu_pods = reqs.size();
  const unsigned long total_slices = ev.gpus * mig::kComputeSlices;

  const auto t0 = std::chrono::steady_clock::now();
  const auto choices = mig::plan_configs(defaults, plan_nodes, pending);
  ev.plan_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  std::vector<Free> balanced, one_g, planned;
  for (size_t i = 0; i < plan_nodes.size(); ++i) {
    const auto gpus = static_cast<unsigned>(plan_nodes[i].gpus.size());
    balanced.push_back(layout(defaults, "all-balanced", gpus));
    one_g.push_back(layout(defaults, "all-1g.10gb", gpus));
    planned.push_back(layout(defaults, choices[i].config, gpus));
    ++ev.planner_choices[choices[i].config];
  }
  const auto run = time_mode ? run_time : run_instant;
  ev.layouts.push_back(run("planner", std::move(planned), reqs, total_slices));
  ev.layouts.push_back(run("all-balanced", std::move(balanced), reqs, total_slices));
  ev.layouts.push_back(run("all-1g.10gb", std::move(one_g), reqs, total_slices));
  return ev;
}

}  // namespace kgpu::sim
