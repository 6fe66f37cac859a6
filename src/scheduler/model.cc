#include "scheduler/model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "common/timestamp.h"
#include "k8s/objects.h"
#include "framework/k8s_adapter.h"

namespace kgpu::scheduler {

using nlohmann::json;

namespace detail {

std::string gpu_list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace detail

using namespace detail;

auto GpuScheduler::Impl::pod_info(const k8s::api::PodObject& pod, std::optional<sched::Pod>* spec) -> PodInfo {
  PodInfo p;
  p.uid = pod.uid;
  p.ns = pod.ns;
  p.name = pod.name;
  p.node = pod.node;
  p.holds = pod.holds();
  p.deleting = pod.deleting;
  p.gated = pod.gated;
  p.cpu_milli = pod.cpu_milli;
  p.memory_mib = pod.memory_mib;
  for (const char* r : {kWholeResource, kSharedResource}) {
    if (const int64_t units = pod.request(r); units > 0) {
      p.resource = r;
      p.units = units;
      break;
    }
  }
  if (p.resource.empty()) return p;
  if (spec != nullptr) *spec = sched::pod_from_k8s(pod.doc, pod.view, p.resource);
  p.containers = container_requests(pod, p.resource);
  const auto annotation = [&](const char* key) { return std::string(pod.annotation(key).value_or("")); };
  if (annotation(k8s::kAnnotationGpuResource) == p.resource) {
    if (auto a = k8s::parse_assignment(annotation(k8s::kAnnotationGpuAssignment))) {
      for (const auto& c : *a)
        for (const auto& u : c.uuids)
          if (std::find(p.assigned.begin(), p.assigned.end(), u) == p.assigned.end()) p.assigned.push_back(u);
    }
  }
  p.allocated = pod.annotation(k8s::kAnnotationGpuAllocated).has_value() &&
                !pod.annotation(k8s::kAnnotationGpuAllocated)->empty();
  if (auto t = parse_rfc3339(annotation(k8s::kAnnotationBoundAt))) p.bound_at = *t;
  return p;
}

std::string GpuScheduler::Impl::structure_of(const NodeInfo& n) {
  std::string s = fmt::format("{}|{}|{}|{}|{}|", n.base.cpu_milli, n.base.memory_mib, n.base.unschedulable,
                              n.base.gpu_model, n.base.taints.size());
  for (const auto& t : n.base.taints) s += t.key + "=" + t.value + ":" + t.effect + ";";
  for (const auto& [k, v] : n.base.labels) s += k + "=" + v + ";";
  if (n.report)
    for (const auto& g : n.report->gpus)
      s += fmt::format("#{}:{}:{}:{}:{}:{}", g.index, g.uuid, g.healthy, g.resource, g.replicas, g.model);
  return s;
}

void GpuScheduler::Impl::rebuild() {
  std::vector<Pool> fresh;
  for (const char* resource : {kWholeResource, kSharedResource}) {
    Pool pool;
    pool.resource = resource;
    {  // the pool's replica count: the most common among its GPUs (1: whole GPUs)
      std::map<int, int> counts;
      for (const auto& [name, n] : nodes)
        if (n.report)
          for (const auto& g : n.report->gpus)
            if (g.resource == resource && g.healthy) ++counts[g.replicas];
      int best = 0;
      for (const auto& [r, c] : counts)
        if (c > best) best = c, pool.replicas = r;
    }
    std::vector<sched::NodeState> states;
    for (const auto& [name, n] : nodes) {
      if (!n.report) continue;
      std::vector<std::string> uuids;
      for (const auto& g : n.report->gpus)
        if (g.resource == resource && g.healthy && g.replicas == pool.replicas) uuids.push_back(g.uuid);
      if (uuids.empty()) continue;
      sched::NodeState s = n.base;
      if (s.gpu_model.empty())
        for (const auto& g : n.report->gpus)
          if (g.resource == resource) s.gpu_model = g.model;
      s.gpu_free.assign(uuids.size(), sched::kMilli);
      for (size_t g = 0; g < uuids.size(); ++g) pool.gpu_at[uuids[g]] = {states.size(), static_cast<int>(g)};
      pool.node_index[name] = states.size();
      pool.uuids.push_back(std::move(uuids));
      states.push_back(std::move(s));
    }
    pool.cluster = std::make_unique<sched::Cluster>(std::move(states));
    fresh.push_back(std::move(pool));
  }
  pools = std::move(fresh);
  applied.clear();
  report_keys.clear();
  dirty = false;
  for (auto& [uid, p] : pods) charge(uid);
  for (const auto& [uid, a] : assumed)
    if (const auto p = pods.find(uid); p == pods.end() || !p->second.holds) charge(uid);
  for (const auto& [name, n] : nodes) charge_unknown_reported(name);
  refresh_workload();
  ++st.rebuilds;
}

void GpuScheduler::Impl::refresh_workload() {
  for (size_t i = 0; i < pools.size(); ++i) {
    Pool& pool = pools[i];
    std::vector<sched::Pod> shapes;
    for (const auto& [uid, p] : pods) {
      if (p.resource != pool.resource || (!p.holds && (p.node.size() || p.deleting))) continue;
      shapes.push_back(sched_pod(pool, p.units, p.cpu_milli, p.memory_mib));
    }
    auto workload = sched::target_workload(shapes);
    if (workload.empty()) {
      sched::TaskShape one;
      one.num_gpu = 1;
      one.gpu_milli = sched::kMilli / std::max(1, pool.replicas);
      one.popularity = 1;
      workload.push_back(one);
    }
    // A new framework starts its score caches cold (every node re-scored once per shape), so the
    // workload is replaced only when it moved: total variation distance above 2 %.
    if (pool.framework && workload_distance(pool.workload, workload) <= 0.02) continue;
    pool.workload = std::move(workload);
    sched::SchedulingContext ctx;
    ctx.workload = pool.workload;
    ctx.tie_break = opt.tie_break;
    auto fw = sched::make_framework(opt.policy, ctx);
    if (fw) pool.framework.emplace(std::move(*fw));
  }
  workload_at = clock.steady_now();
}

double GpuScheduler::Impl::workload_distance(const std::vector<sched::TaskShape>& a,
                                             const std::vector<sched::TaskShape>& b) {
  const auto key = [](const sched::TaskShape& t) {
    return std::tuple(t.num_gpu, t.gpu_milli, t.cpu_milli, t.memory_mib, t.gpu_models);
  };
  std::map<decltype(key(a.front())), std::pair<double, double>> p;
  for (const auto& t : a) p[key(t)].first += t.popularity;
  for (const auto& t : b) p[key(t)].second += t.popularity;
  double d = 0;
  for (const auto& [k, v] : p) d += std::abs(v.first - v.second);
  return d / 2;
}

sched::Pod GpuScheduler::Impl::sched_pod(const Pool& pool, int64_t units, int64_t cpu, int64_t mem) {
  sched::Pod p;
  p.cpu_milli = cpu;
  p.memory_mib = mem;
  {
    const int64_t r = std::max(1, pool.replicas);
    if (units >= r && units % r == 0) {  // whole GPUs, R replicas each
      p.num_gpu = static_cast<int>(std::min<int64_t>(units / r, std::numeric_limits<int>::max()));
      p.gpu_milli = sched::kMilli;
    } else {
      p.num_gpu = units > 0 ? 1 : 0;
      const int64_t milli = units > std::numeric_limits<int64_t>::max() / sched::kMilli
                                ? std::numeric_limits<int64_t>::max()
                                : units * sched::kMilli / r;
      p.gpu_milli = static_cast<int>(std::min<int64_t>(milli, std::numeric_limits<int>::max()));
    }
  }
  return p;
}

bool GpuScheduler::Impl::reported(const std::string& node, const std::string& uid, std::vector<Hold>* holds) const {
  const auto n = nodes.find(node);
  if (n == nodes.end() || !n->second.reported_uids.contains(uid)) return false;
  bool any = false;
  for (const auto& g : n->second.report->gpus)
    for (const auto& u : g.used)
      if (u.uid == uid) {
        any = true;
        auto it = std::find_if(holds->begin(), holds->end(), [&](const Hold& h) { return h.uuid == g.uuid; });
        if (it == holds->end())
          holds->push_back(Hold{g.uuid, u.replicas});
        else
          it->replicas += u.replicas;
      }
  return any;
}

void GpuScheduler::Impl::hold_all(int64_t units, const std::vector<std::string>& uuids, std::vector<Hold>* out) {
  const int64_t each = uuids.empty() ? 1 : units / static_cast<int64_t>(uuids.size());
  for (const auto& u : uuids) out->push_back(Hold{u, static_cast<int>(std::clamp<int64_t>(each, 1, 1 << 20))});
}

auto GpuScheduler::Impl::want(const std::string& uid) const -> std::optional<Want> {
  Want w;
  const auto requests_of = [&w](const auto& x) {  // a PodInfo or an Assumed
    w.node = x.node;
    w.resource = x.resource;
    w.units = x.units;
    w.cpu_milli = x.cpu_milli;
    w.memory_mib = x.memory_mib;
  };
  const auto p = pods.find(uid);
  const auto a = assumed.find(uid);
  if (p != pods.end() && p->second.holds) {
    const PodInfo& pi = p->second;
    requests_of(pi);
    if (pi.resource.empty()) return w;
    if (reported(pi.node, uid, &w.holds)) return w;
    if (!pi.assigned.empty()) {
      hold_all(pi.units, pi.assigned, &w.holds);
      return w;
    }
    if (a != assumed.end() && a->second.node == pi.node) {
      hold_all(pi.units, a->second.uuids, &w.holds);
      return w;
    }
    w.known = false;
    return w;
  }
  if (a != assumed.end() && (p == pods.end() || !p->second.deleting)) {
    const Assumed& as = a->second;
    requests_of(as);
    hold_all(as.units, as.uuids, &w.holds);
    return w;
  }
  return std::nullopt;
}

void GpuScheduler::Impl::release(const std::string& key) {
  const auto it = applied.find(key);
  if (it == applied.end()) return;
  for (const auto& ap : it->second) pools[ap.pool].cluster->release(ap.pod, ap.placement);
  applied.erase(it);
}

void GpuScheduler::Impl::apply(const std::string& key, const Want& w) {
  std::vector<Applied> out;
  for (size_t i = 0; i < pools.size(); ++i) {
    Pool& pool = pools[i];
    const auto idx = pool.node_index.find(w.node);
    if (idx == pool.node_index.end()) continue;
    // CPU and memory once per pool, with the first GPU hold of this pool's resource if any.
    bool cpu_charged = false;
    const auto charge_one = [&](sched::Pod pod, std::vector<int> gpus) {
      if (cpu_charged) {
        pod.cpu_milli = 0;
        pod.memory_mib = 0;
      }
      cpu_charged = true;
      sched::Placement pl{idx->second, std::move(gpus)};
      pool.cluster->assign(pod, pl);
      out.push_back(Applied{i, std::move(pod), std::move(pl)});
    };
    if (w.resource == pool.resource && w.units > 0) {
      if (!w.known) {
        sched::Pod pod = sched_pod(pool, w.units, w.cpu_milli, w.memory_mib);
        auto gpus = sched::default_gpus(pod, pool.cluster->node(idx->second));
        if (!gpus) {  // over-committed already: charge what is there
          gpus.emplace();
          for (int g = 0; g < pool.cluster->node(idx->second).gpus() && static_cast<int>(gpus->size()) < pod.num_gpu;
               ++g)
            if (!pod.sharing() || gpus->empty()) gpus->push_back(g);
          pod.num_gpu = static_cast<int>(gpus->size());
        }
        charge_one(std::move(pod), std::move(*gpus));
        continue;
      }
      for (const auto& h : w.holds) {
        const auto at = pool.gpu_at.find(h.uuid);
        if (at == pool.gpu_at.end() || at->second.first != idx->second) continue;
        sched::Pod pod = sched_pod(pool, h.replicas, w.cpu_milli, w.memory_mib);
        charge_one(std::move(pod), {at->second.second});
      }
    }
    if (!cpu_charged && (w.cpu_milli != 0 || w.memory_mib != 0)) {
      sched::Pod pod;
      pod.cpu_milli = w.cpu_milli;
      pod.memory_mib = w.memory_mib;
      charge_one(std::move(pod), {});
    }
  }
  if (!out.empty()) applied[key] = std::move(out);
}

void GpuScheduler::Impl::charge(const std::string& uid) {
  if (dirty) return;
  release(uid);
  if (auto w = want(uid)) apply(uid, *w);
}

void GpuScheduler::Impl::charge_unknown_reported(const std::string& node) {
  if (dirty) return;
  if (const auto keys = report_keys.find(node); keys != report_keys.end()) {
    for (const auto& key : keys->second) release(key);
    report_keys.erase(keys);
  }
  const auto n = nodes.find(node);
  if (n == nodes.end() || !n->second.report) return;
  const std::string prefix = "report/" + node + "/";
  for (const auto& uid : n->second.reported_uids) {
    if (const auto p = pods.find(uid); p != pods.end() && p->second.holds) continue;
    Want w;
    w.node = node;
    reported(node, uid, &w.holds);
    for (const auto& g : n->second.report->gpus)
      for (const auto& u : g.used)
        if (u.uid == uid) w.resource = g.resource;
    w.units = 1;
    apply(prefix + uid, w);
    report_keys[node].push_back(prefix + uid);
  }
}

void GpuScheduler::Impl::recharge_report_of(const std::string& node, const std::string& uid) {
  const auto n = nodes.find(node);
  if (n != nodes.end() && n->second.reported_uids.contains(uid)) charge_unknown_reported(node);
}

void GpuScheduler::Impl::maybe_refresh() {
  if (dirty) rebuild();
  const auto now = clock.steady_now();
  for (auto it = assumed.begin(); it != assumed.end();) {
    const bool expired =
        it->second.gang.empty() ? now - it->second.at > opt.assume_ttl : now > it->second.deadline;
    if (!it->second.bound && expired) {
      const std::string uid = it->first;
      it = assumed.erase(it);
      charge(uid);
    } else {
      ++it;
    }
  }
  if (now - workload_at >= opt.workload_refresh) refresh_workload();
}

auto GpuScheduler::Impl::pool_for(const std::string& resource) -> Pool* {
  for (auto& p : pools)
    if (p.resource == resource) return &p;
  return nullptr;
}

std::optional<sched::Pod> GpuScheduler::Impl::pod_for_pool(std::optional<sched::Pod> p, const Pool& pool,
                                                           int64_t units) {
  if (!p) return std::nullopt;
  const sched::Pod shape = sched_pod(pool, units, p->cpu_milli, p->memory_mib);
  p->num_gpu = shape.num_gpu;
  p->gpu_milli = shape.gpu_milli;
  return p;
}

auto GpuScheduler::Impl::choose(const PodInfo& info, const sched::Pod& pod, Pool& pool, const sched::Placement& placement)
    -> Assumed {
  std::vector<int> gpus = placement.gpus;
  pool.framework->unreserve(pod, placement, *pool.cluster);
  if (!pod.sharing()) gpus = nvlink_choice(pool, placement.node, std::move(gpus));
  Assumed a;
  a.pod = info.ns + "/" + info.name;
  a.node = pool.cluster->node(placement.node).name;
  a.resource = info.resource;
  for (int g : gpus) a.uuids.push_back(pool.uuids[placement.node][g]);
  a.units = info.units;
  a.cpu_milli = info.cpu_milli;
  a.memory_mib = info.memory_mib;
  a.containers = info.containers;
  a.at = clock.steady_now();
  return a;
}

std::vector<int> GpuScheduler::Impl::nvlink_choice(const Pool& pool, size_t node, std::vector<int> chosen) const {
  if (chosen.size() < 2) return chosen;
  const auto& names = pool.uuids[node];
  const auto ni = nodes.find(pool.cluster->node(node).name);
  if (ni == nodes.end() || !ni->second.report) return chosen;
  std::map<std::string, const k8s::ReportedGpu*> by_uuid;
  for (const auto& g : ni->second.report->gpus) by_uuid[g.uuid] = &g;
  const auto linked = [&](int a, int b) {
    const auto* ga = by_uuid[names[a]];
    const auto* gb = by_uuid[names[b]];
    if (ga == nullptr || gb == nullptr) return false;
    return std::find(ga->nvlink_peers.begin(), ga->nvlink_peers.end(), gb->index) != ga->nvlink_peers.end();
  };
  const auto& state = pool.cluster->node(node);
  std::vector<int> idle;
  for (int g = 0; g < state.gpus(); ++g)
    if (state.gpu_free[g] == sched::kMilli) idle.push_back(g);
  // Greedy: grow from each idle GPU, adding the GPU with the most links into the set.
  std::vector<int> best = chosen;
  int best_links = -1;
  const auto links_of = [&](const std::vector<int>& set) {
    int l = 0;
    for (size_t i = 0; i < set.size(); ++i)
      for (size_t j = i + 1; j < set.size(); ++j) l += linked(set[i], set[j]);
    return l;
  };
  best_links = links_of(best);
  for (int seed : idle) {
    std::vector<int> set{seed};
    while (set.size() < chosen.size()) {
      int pick = -1, pick_links = -1;
      for (int g : idle) {
        if (std::find(set.begin(), set.end(), g) != set.end()) continue;
        int l = 0;
        for (int s : set) l += linked(g, s);
        if (l > pick_links) pick = g, pick_links = l;
      }
      if (pick < 0) break;
      set.push_back(pick);
    }
    if (set.size() == chosen.size()) {
      const int l = links_of(set);
      if (l > best_links) {
        std::sort(set.begin(), set.end());
        best = set, best_links = l;
      }
    }
  }
  return best;
}

bool GpuScheduler::Impl::preemption_may_help(sched::FitCode c) {
  return c == sched::FitCode::kInsufficient || c == sched::FitCode::kGpuShare || c == sched::FitCode::kNoGpuPlacement;
}

std::string GpuScheduler::Impl::gpu_detail(const Pool& pool, const sched::NodeState& n, const sched::Pod& pod) const {
  if (pod.sharing()) {
    return fmt::format(" (largest free share on a GPU: {:.3g}; the pod asks {:.3g} of a GPU with {} replicas)",
                       n.max_gpu_free() / 1000.0, pod.gpu_milli / 1000.0, pool.replicas);
  }
  return fmt::format(" ({} of {} GPUs free; the pod asks {})", n.full_free_gpus(), n.gpus(), pod.num_gpu);
}

std::string GpuScheduler::Impl::explain(const Pool& pool, const sched::Pod& pod, const std::vector<char>& allowed,
                                        size_t candidates, FilterDecision& d) const {
  std::map<std::string, int> reasons;
  for (size_t i = 0; i < allowed.size(); ++i) {
    if (!allowed[i]) continue;
    const auto& n = pool.cluster->node(i);
    sched::FitStatus s = sched::run_filters(filters, pod, n);
    if (s.fits()) s = sched::FitStatus{sched::FitCode::kNoGpuPlacement, pool.framework->score_plugin().name()};
    std::string msg = s.message(n);
    ++reasons[msg];
    const bool gpu = s.code == sched::FitCode::kGpuShare || s.code == sched::FitCode::kNoGpuPlacement ||
                     (s.code == sched::FitCode::kInsufficient && std::string_view(s.resource) == kWholeResource);
    if (gpu) msg += gpu_detail(pool, n, pod);
    (preemption_may_help(s.code) ? d.result.failed : d.result.unresolvable)[n.name] = msg;
  }
  for (const auto& [name, why] : d.result.unresolvable)
    if (!pool.node_index.contains(name)) ++reasons[why];
  sched::Outcome summary;
  summary.nodes = candidates;
  summary.reasons = reasons;
  d.message = summary.message();
  std::string top;
  int top_n = -1;
  for (const auto& [r, n] : reasons)
    if (n > top_n) top = r, top_n = n;
  return top;
}

}  // namespace kgpu::scheduler
