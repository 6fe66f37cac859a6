#include "scheduler/scheduler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "common/log.h"
#include "common/timestamp.h"
#include "k8s/document.h"
#include "k8s/objects.h"
#include "kube/client.h"
#include "kube/events.h"
#include "sched/k8s_adapter.h"
#include "scheduler/metrics.h"

namespace kgpu::scheduler {

using nlohmann::json;

namespace {

const json* find_path(const json& j, std::initializer_list<const char*> path) {
  const json* cur = &j;
  for (const char* k : path) {
    if (!cur->is_object()) return nullptr;
    const auto it = cur->find(k);
    if (it == cur->end()) return nullptr;
    cur = &*it;
  }
  return cur;
}

std::string str_at(const json& j, std::initializer_list<const char*> path) {
  const json* v = find_path(j, path);
  return v != nullptr && v->is_string() ? v->get<std::string>() : std::string();
}

std::string annotation(const json& obj, const char* key) {
  const std::string* v = k8s::object_annotation(obj, key);
  return v != nullptr ? *v : std::string();
}

// A document view of one object, for the k8s decoders (requests, affinity, tolerations).
// kube-scheduler's objects come from typed informers, which drop apiVersion and kind: the
// decoders need them, so they are filled in for `kind` ("Pod", "Node") when absent.
k8s::LoadResult load_object(const json& obj, const char* kind, const std::string& what) {
  if (obj.contains("kind") && obj.contains("apiVersion")) return k8s::load_text(obj.dump(), what, k8s::InputFormat::kJson);
  json typed = obj;
  typed["apiVersion"] = "v1";
  typed["kind"] = kind;
  return k8s::load_text(typed.dump(), what, k8s::InputFormat::kJson);
}

std::string gpu_list(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

}  // namespace

std::vector<ContainerRequest> container_requests(const json& pod, const std::string& resource) {
  std::vector<ContainerRequest> out;
  for (const auto& c : k8s::pod_containers(pod))
    if (const int64_t units = c.request(resource); units > 0) out.push_back({c.name, units, c.init && !c.sidecar});
  return out;
}

k8s::Assignment split_assignment(const std::vector<ContainerRequest>& containers, const std::vector<std::string>& gpus,
                                 bool share) {
  k8s::Assignment out;
  size_t next = 0;
  for (const auto& c : containers) {
    k8s::ContainerGpus cg{c.name, {}};
    if (share && gpus.size() <= 1) {
      if (!gpus.empty()) cg.uuids.push_back(gpus.front());
    } else if (c.init) {
      for (size_t i = 0; i < gpus.size() && static_cast<int64_t>(i) < c.units; ++i) cg.uuids.push_back(gpus[i]);
    } else {
      for (int64_t i = 0; i < c.units && next < gpus.size(); ++i) cg.uuids.push_back(gpus[next++]);
    }
    out.push_back(std::move(cg));
  }
  return out;
}

// -----------------------------------------------------------------------------------------------

struct GpuScheduler::Impl {
  struct NodeInfo {
    sched::NodeState base;
    std::optional<k8s::NodeGpuReport> report;
    std::set<std::string> reported_uids;  // pods the report lists on some GPU
    std::string report_error;
    std::string structure;  // what the pools are built from, as text (a change: rebuild)
  };

  // One GPU a charge holds: the uuid and the replicas of it (1 for a whole GPU).
  struct Hold {
    std::string uuid;
    int replicas = 1;
  };

  struct PodInfo {
    std::string uid, ns, name, node;
    bool holds = false;     // bound, not finished: its requests count on the node
    bool deleting = false;  // deletionTimestamp set
    bool gated = false;     // schedulingGates
    std::string resource;   // the GPU resource requested ("" none)
    int64_t units = 0;
    int64_t cpu_milli = 0, memory_mib = 0;
    std::vector<std::string> assigned;  // kgpu.io/gpu-assignment (all containers), when for `resource`
    std::vector<ContainerRequest> containers;
    bool allocated = false;  // kgpu.io/gpu-allocated present
    Clock::SystemTime bound_at{};
  };

  // A choice of ours not yet seen bound by the informer.
  struct Assumed {
    std::string node, resource;
    std::vector<std::string> uuids;
    int64_t units = 0, cpu_milli = 0, memory_mib = 0;
    std::vector<ContainerRequest> containers;
    Clock::SteadyTime at{};
    bool bound = false;  // the binding was written: kept until the informer shows the pod
    Clock::SystemTime bound_at{};
  };

  // What one charge took from one pool, so it can be given back exactly.
  struct Applied {
    size_t pool = 0;
    sched::Pod pod;
    sched::Placement placement;
  };

  struct Pool {
    std::string resource;
    int replicas = 1;  // shared pool: replicas per GPU (the most common among the nodes)
    std::unique_ptr<sched::Cluster> cluster;
    std::unordered_map<std::string, size_t> node_index;
    std::vector<std::vector<std::string>> uuids;  // per pool node, the GPUs in gpu_free order
    std::unordered_map<std::string, std::pair<size_t, int>> gpu_at;
    std::optional<sched::Framework> framework;
    std::vector<sched::TaskShape> workload;
  };

  SchedulerOptions opt;
  Clock& clock;
  kube::Client* client;
  kube::EventRecorder* events;

  mutable std::mutex mu;
  std::map<std::string, NodeInfo> nodes;  // by name (cluster order)
  std::unordered_map<std::string, PodInfo> pods;  // by uid
  std::unordered_map<std::string, std::unordered_set<std::string>> pods_on_node;
  std::unordered_map<std::string, Assumed> assumed;  // by uid
  std::unordered_map<std::string, std::vector<Applied>> applied;  // by charge key
  std::unordered_map<std::string, std::vector<std::string>> report_keys;  // node -> its "report/" charge keys
  std::vector<Pool> pools;
  bool dirty = true;
  Clock::SteadyTime workload_at{};
  std::mt19937_64 rng;
  std::unordered_map<std::string, std::string> pending_reason;  // uid -> last filter outcome reason
  SchedulerStats st;
  Metrics metrics;

  Impl(SchedulerOptions o, kube::Client* c, kube::EventRecorder* e)
      : opt(std::move(o)), clock(*opt.clock), client(c), events(e), rng(opt.seed) {}

  // ---- model input -------------------------------------------------------------------------------

  // `spec`, when given, receives the pod as the scheduler's framework sees it (selectors, affinity,
  // tolerations, requests) for its GPU resource, from the same decoding; nullopt if it cannot be read.
  static PodInfo pod_info(const json& pod, std::optional<sched::Pod>* spec = nullptr) {
    PodInfo p;
    p.uid = str_at(pod, {"metadata", "uid"});
    p.ns = str_at(pod, {"metadata", "namespace"});
    p.name = str_at(pod, {"metadata", "name"});
    p.node = str_at(pod, {"spec", "nodeName"});
    const std::string phase = str_at(pod, {"status", "phase"});
    p.holds = !p.node.empty() && phase != "Succeeded" && phase != "Failed";
    p.deleting = find_path(pod, {"metadata", "deletionTimestamp"}) != nullptr &&
                 !find_path(pod, {"metadata", "deletionTimestamp"})->is_null();
    const json* gates = find_path(pod, {"spec", "schedulingGates"});
    p.gated = gates != nullptr && gates->is_array() && !gates->empty();
    auto loaded = load_object(pod, "Pod", "pod " + p.ns + "/" + p.name);
    if (!loaded.documents.empty()) {
      if (auto kp = k8s::as_pod(loaded.documents.front())) {
        p.cpu_milli = k8s::pod_request(kp->spec, "cpu").milli_value();
        const int64_t bytes = k8s::pod_request(kp->spec, "memory").value();
        p.memory_mib = bytes <= 0 ? 0 : (bytes + (1 << 20) - 1) >> 20;
        for (const char* r : {kWholeResource, kSharedResource}) {
          const int64_t units = k8s::pod_request(kp->spec, r).value();
          if (units > 0) {
            p.resource = r;
            p.units = units;
            break;
          }
        }
        if (spec != nullptr && !p.resource.empty())
          *spec = sched::pod_from_k8s(loaded.documents.front(), *kp, p.resource);
      }
    }
    if (!p.resource.empty()) {
      p.containers = container_requests(pod, p.resource);
      if (annotation(pod, k8s::kAnnotationGpuResource) == p.resource) {
        if (auto a = k8s::parse_assignment(annotation(pod, k8s::kAnnotationGpuAssignment))) {
          for (const auto& c : *a)
            for (const auto& u : c.uuids)
              if (std::find(p.assigned.begin(), p.assigned.end(), u) == p.assigned.end()) p.assigned.push_back(u);
        }
      }
      p.allocated = !annotation(pod, k8s::kAnnotationGpuAllocated).empty();
      if (auto t = parse_rfc3339(annotation(pod, k8s::kAnnotationBoundAt))) p.bound_at = *t;
    }
    return p;
  }

  static std::string structure_of(const NodeInfo& n) {
    std::string s = fmt::format("{}|{}|{}|{}|{}|", n.base.cpu_milli, n.base.memory_mib, n.base.unschedulable,
                                n.base.gpu_model, n.base.taints.size());
    for (const auto& t : n.base.taints) s += t.key + "=" + t.value + ":" + t.effect + ";";
    for (const auto& [k, v] : n.base.labels) s += k + "=" + v + ";";
    if (n.report)
      for (const auto& g : n.report->gpus)
        s += fmt::format("#{}:{}:{}:{}:{}:{}", g.index, g.uuid, g.healthy, g.resource, g.replicas, g.model);
    return s;
  }

  // ---- pools -------------------------------------------------------------------------------------

  void rebuild() {
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

  void refresh_workload() {
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

  // Total variation distance between two workloads (shapes matched on their requests).
  static double workload_distance(const std::vector<sched::TaskShape>& a, const std::vector<sched::TaskShape>& b) {
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

  // The scheduler's pod for a request of `units` of the pool's resource.
  static sched::Pod sched_pod(const Pool& pool, int64_t units, int64_t cpu, int64_t mem) {
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

  // What a charge holds now: the GPUs (from the report, the assignment, or our choice) and
  // whether they are known; nullopt when the key holds nothing.
  struct Want {
    std::string node, resource;
    int64_t units = 0, cpu_milli = 0, memory_mib = 0;
    std::vector<Hold> holds;
    bool known = true;  // false: place a placeholder by the default choice
  };

  // Adds what the node's report says `uid` holds; whether it lists the pod at all.
  bool reported(const std::string& node, const std::string& uid, std::vector<Hold>* holds) const {
    const auto n = nodes.find(node);
    if (n == nodes.end() || !n->second.reported_uids.contains(uid)) return false;
    bool any = false;
    for (const auto& g : n->second.report->gpus)
      for (const auto& u : g.used)
        if (u.uid == uid) {
          any = true;
          auto it = std::find_if(holds->begin(), holds->end(), [&](const Hold& h) { return h.uuid == g.uuid; });
          if (it == holds->end()) holds->push_back(Hold{g.uuid, u.replicas});
          else it->replicas += u.replicas;
        }
    return any;
  }

  // A share's replicas spread evenly over its GPUs (one GPU, or R each when k is a multiple of R).
  static void hold_all(int64_t units, const std::vector<std::string>& uuids, std::vector<Hold>* out) {
    const int64_t each = uuids.empty() ? 1 : units / static_cast<int64_t>(uuids.size());
    for (const auto& u : uuids) out->push_back(Hold{u, static_cast<int>(std::clamp<int64_t>(each, 1, 1 << 20))});
  }

  std::optional<Want> want(const std::string& uid) const {
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

  void release(const std::string& key) {
    const auto it = applied.find(key);
    if (it == applied.end()) return;
    for (const auto& ap : it->second) pools[ap.pool].cluster->release(ap.pod, ap.placement);
    applied.erase(it);
  }

  void apply(const std::string& key, const Want& w) {
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
            for (int g = 0; g < pool.cluster->node(idx->second).gpus() && static_cast<int>(gpus->size()) < pod.num_gpu; ++g)
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

  void charge(const std::string& uid) {
    if (dirty) return;
    release(uid);
    if (auto w = want(uid)) apply(uid, *w);
  }

  // Report entries for pods the informer does not know (yet, or any more).
  void charge_unknown_reported(const std::string& node) {
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

  // A pod the node's report lists changed between known and unknown: its report charge follows.
  void recharge_report_of(const std::string& node, const std::string& uid) {
    const auto n = nodes.find(node);
    if (n != nodes.end() && n->second.reported_uids.contains(uid)) charge_unknown_reported(node);
  }

  void maybe_refresh() {
    if (dirty) rebuild();
    const auto now = clock.steady_now();
    for (auto it = assumed.begin(); it != assumed.end();) {
      if (!it->second.bound && now - it->second.at > opt.assume_ttl) {
        const std::string uid = it->first;
        it = assumed.erase(it);
        charge(uid);
      } else {
        ++it;
      }
    }
    if (now - workload_at >= opt.workload_refresh) refresh_workload();
  }

  // ---- decisions ---------------------------------------------------------------------------------

  Pool* pool_for(const std::string& resource) {
    for (auto& p : pools)
      if (p.resource == resource) return &p;
    return nullptr;
  }

  // The pod (pod_info's `spec`) as `pool` schedules it: its request in the pool's replicas.
  static std::optional<sched::Pod> pod_for_pool(std::optional<sched::Pod> p, const Pool& pool, int64_t units) {
    if (!p) return std::nullopt;
    const sched::Pod shape = sched_pod(pool, units, p->cpu_milli, p->memory_mib);
    p->num_gpu = shape.num_gpu;
    p->gpu_milli = shape.gpu_milli;
    return p;
  }

  // NVLink: among the node's idle GPUs, the set of `n` with the most NVLink pairs, starting from
  // the framework's choice (all idle GPUs are alike for fragmentation).
  std::vector<int> nvlink_choice(const Pool& pool, size_t node, std::vector<int> chosen) const {
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

  static bool preemption_may_help(sched::FitCode c) {
    return c == sched::FitCode::kInsufficient || c == sched::FitCode::kGpuShare || c == sched::FitCode::kNoGpuPlacement;
  }

  std::string gpu_detail(const Pool& pool, const sched::NodeState& n, const sched::Pod& pod) const {
    if (pod.sharing()) {
      return fmt::format(" (largest free share on a GPU: {:.3g}; the pod asks {:.3g} of a GPU with {} replicas)",
                         n.max_gpu_free() / 1000.0, pod.gpu_milli / 1000.0, pool.replicas);
    }
    return fmt::format(" ({} of {} GPUs free; the pod asks {})", n.full_free_gpus(), n.gpus(), pod.num_gpu);
  }
};

// -----------------------------------------------------------------------------------------------

Result<std::unique_ptr<GpuScheduler>> GpuScheduler::create(SchedulerOptions options, kube::Client* client,
                                                           kube::EventRecorder* events) {
  sched::SchedulingContext probe;
  if (auto fw = sched::make_framework(options.policy, probe); !fw) return std::unexpected(fw.error());
  if (options.clock == nullptr) options.clock = &Clock::real();
  auto impl = std::make_unique<Impl>(std::move(options), client, events);
  return std::unique_ptr<GpuScheduler>(new GpuScheduler(std::move(impl)));
}

GpuScheduler::GpuScheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GpuScheduler::~GpuScheduler() = default;

void GpuScheduler::upsert_node(const json& node) {
  const std::string name = str_at(node, {"metadata", "name"});
  if (name.empty()) return;
  Impl::NodeInfo info;
  auto loaded = load_object(node, "Node", "node " + name);
  if (!loaded.documents.empty())
    if (auto kn = k8s::as_node(loaded.documents.front())) info.base = sched::node_from_k8s(loaded.documents.front(), *kn);
  info.base.name = name;
  const std::string text = annotation(node, k8s::kAnnotationNodeGpus);
  if (!text.empty()) {
    auto r = k8s::parse_node_report(text);
    if (r) info.report = std::move(*r);
    else info.report_error = "node " + name + ": " + r.error().message;
  }
  if (info.report)
    for (const auto& g : info.report->gpus)
      for (const auto& u : g.used) info.reported_uids.insert(u.uid);
  info.structure = Impl::structure_of(info);
  std::lock_guard lock(impl_->mu);
  auto& nodes = impl_->nodes;
  const auto it = nodes.find(name);
  const bool structural = it == nodes.end() || it->second.structure != info.structure;
  const bool used_changed = it == nodes.end() || !(it->second.report == info.report);
  if (!info.report_error.empty() && (it == nodes.end() || it->second.report_error != info.report_error))
    log::warn("ignoring the GPU report of a node", {log::kv("node", name), log::kv("error", info.report_error)});
  nodes[name] = std::move(info);
  if (structural) {
    impl_->dirty = true;
    return;
  }
  if (used_changed && !impl_->dirty) {
    if (const auto on = impl_->pods_on_node.find(name); on != impl_->pods_on_node.end())
      for (const auto& uid : on->second) impl_->charge(uid);
    impl_->charge_unknown_reported(name);
  }
}

void GpuScheduler::remove_node(const std::string& name) {
  std::lock_guard lock(impl_->mu);
  if (impl_->nodes.erase(name)) impl_->dirty = true;
}

void GpuScheduler::upsert_pod(const json& pod) {
  Impl::PodInfo p = Impl::pod_info(pod);
  if (p.uid.empty()) return;
  std::lock_guard lock(impl_->mu);
  auto& im = *impl_;
  const auto old = im.pods.find(p.uid);
  if (old != im.pods.end() && old->second.node != p.node) im.pods_on_node[old->second.node].erase(p.uid);
  if (!p.node.empty()) im.pods_on_node[p.node].insert(p.uid);
  const std::string uid = p.uid;
  const std::string node = p.node;
  const bool bound = p.holds;
  im.pods[uid] = std::move(p);
  if (bound) {
    im.assumed.erase(uid);
    im.pending_reason.erase(uid);
  }
  im.charge(uid);
  im.recharge_report_of(node, uid);
}

void GpuScheduler::remove_pod(const json& pod) {
  const std::string uid = str_at(pod, {"metadata", "uid"});
  std::lock_guard lock(impl_->mu);
  auto& im = *impl_;
  const auto it = im.pods.find(uid);
  std::string node;
  if (it != im.pods.end()) {
    node = it->second.node;
    if (const auto on = im.pods_on_node.find(node); on != im.pods_on_node.end()) {
      on->second.erase(uid);
      if (on->second.empty()) im.pods_on_node.erase(on);
    }
    im.pods.erase(it);
  }
  im.assumed.erase(uid);
  im.pending_reason.erase(uid);
  if (!im.dirty) im.release(uid);
  im.recharge_report_of(node, uid);
}

void GpuScheduler::reset(const std::vector<json>& nodes, const std::vector<json>& pods) {
  {
    std::lock_guard lock(impl_->mu);
    impl_->nodes.clear();
    impl_->pods.clear();
    impl_->pods_on_node.clear();
    impl_->dirty = true;
  }
  for (const auto& n : nodes) upsert_node(n);
  for (const auto& p : pods) upsert_pod(p);
}

FilterDecision GpuScheduler::filter(const ExtenderArgs& args) {
  const auto started = impl_->clock.steady_now();
  FilterDecision d;
  std::optional<sched::Pod> spec;
  Impl::PodInfo info = Impl::pod_info(args.pod, &spec);
  std::optional<std::pair<kube::EventTarget, std::string>> warn;
  {
    std::lock_guard lock(impl_->mu);
    auto& im = *impl_;
    im.maybe_refresh();
    ++im.st.filters;
    if (info.resource.empty()) {  // not a GPU pod (managedResources empty): no opinion
      d.result.nodes = args.node_names;
      d.message = "no GPU requested";
      im.metrics.observe_filter("passed", im.clock.steady_now() - started);
      return d;
    }
    if (!info.uid.empty()) {
      im.assumed.erase(info.uid);
      im.charge(info.uid);
    }
    Impl::Pool* pool = im.pool_for(info.resource);
    std::optional<sched::Pod> sp;
    if (pool != nullptr) sp = Impl::pod_for_pool(std::move(spec), *pool, info.units);
    if (pool == nullptr || !pool->framework || !sp) {
      d.result.error = "kgpu scheduler: cannot read pod " + info.ns + "/" + info.name;
      ++im.st.errors;
      im.metrics.observe_filter("error", im.clock.steady_now() - started);
      return d;
    }
    sp->name = info.ns + "/" + info.name;
    std::vector<char> allowed(pool->cluster->nodes().size(), 0);
    for (const auto& name : args.node_names) {
      const auto it = pool->node_index.find(name);
      if (it != pool->node_index.end()) {
        allowed[it->second] = 1;
        continue;
      }
      const auto n = im.nodes.find(name);
      std::string why = n == im.nodes.end() ? "node unknown to kgpu"
                        : !n->second.report ? (n->second.report_error.empty()
                                                   ? "no kgpu agent report (" + std::string(k8s::kAnnotationNodeGpus) + ")"
                                                   : n->second.report_error)
                                            : "no healthy GPU advertised as " + info.resource;
      d.result.unresolvable[name] = why;
    }
    sched::Outcome out = pool->framework->schedule(*sp, *pool->cluster, im.rng, &allowed);
    if (out.placement) {
      const size_t node = out.placement->node;
      std::vector<int> gpus = out.placement->gpus;
      pool->framework->unreserve(*sp, *out.placement, *pool->cluster);
      if (!sp->sharing()) gpus = im.nvlink_choice(*pool, node, std::move(gpus));
      const std::string node_name = pool->cluster->node(node).name;
      Impl::Assumed a;
      a.node = node_name;
      a.resource = info.resource;
      for (int g : gpus) a.uuids.push_back(pool->uuids[node][g]);
      a.units = info.units;
      a.cpu_milli = info.cpu_milli;
      a.memory_mib = info.memory_mib;
      a.containers = info.containers;
      a.at = im.clock.steady_now();
      d.node = node_name;
      d.gpus = a.uuids;
      const std::string key = info.uid.empty() ? info.ns + "/" + info.name : info.uid;
      im.assumed[key] = std::move(a);
      im.charge(key);
      // kube-scheduler reads FailedNodes only to explain a pod that fits nowhere: a chosen pod's
      // reply names the one node and nothing else (5,000 reasons would be 300 kB per decision).
      d.result.nodes = {node_name};
      d.result.unresolvable.clear();
      d.message = fmt::format("{} on {} (GPUs {})", info.ns + "/" + info.name, node_name, gpu_list(d.gpus));
      im.pending_reason.erase(info.uid);
      ++im.st.scheduled;
      im.metrics.observe_filter("scheduled", im.clock.steady_now() - started);
      return d;
    }
    // Why not, node by node, in kube-scheduler's words plus the GPU detail.
    const auto report = sched::explain_fit(*sp, *pool->cluster);
    std::map<std::string, int> reasons;
    for (size_t i = 0; i < allowed.size(); ++i) {
      if (!allowed[i]) continue;
      const auto& n = pool->cluster->node(i);
      sched::FitStatus s = report.status[i];
      if (s.fits()) s = sched::FitStatus{sched::FitCode::kNoGpuPlacement, pool->framework->score_plugin().name()};
      std::string msg = s.message(n);
      ++reasons[msg];
      const bool gpu = s.code == sched::FitCode::kGpuShare || s.code == sched::FitCode::kNoGpuPlacement ||
                       (s.code == sched::FitCode::kInsufficient && std::string_view(s.resource) == kWholeResource);
      if (gpu) msg += im.gpu_detail(*pool, n, *sp);
      (Impl::preemption_may_help(s.code) ? d.result.failed : d.result.unresolvable)[n.name] = msg;
    }
    for (const auto& [name, why] : d.result.unresolvable)
      if (!pool->node_index.contains(name)) ++reasons[why];
    sched::Outcome summary;
    summary.nodes = args.node_names.size();
    summary.reasons = reasons;
    d.message = summary.message();
    std::string top;
    int top_n = -1;
    for (const auto& [r, n] : reasons)
      if (n > top_n) top = r, top_n = n;
    if (!info.uid.empty()) im.pending_reason[info.uid] = top.empty() ? "NoCandidateNodes" : top;
    ++im.st.unschedulable;
    im.metrics.observe_filter("unschedulable", im.clock.steady_now() - started);
    warn.emplace(kube::EventTarget{"v1", "Pod", info.ns, info.name, info.uid}, d.message);
  }
  if (warn && impl_->events != nullptr)
    impl_->events->record(warn->first, "Warning", "FailedScheduling", "Scheduling", "kgpu: " + warn->second);
  return d;
}

std::vector<std::pair<std::string, int64_t>> GpuScheduler::prioritize(const ExtenderArgs& args) {
  const std::string uid = str_at(args.pod, {"metadata", "uid"});
  const std::string key = uid.empty() ? str_at(args.pod, {"metadata", "namespace"}) + "/" +
                                            str_at(args.pod, {"metadata", "name"})
                                      : uid;
  std::lock_guard lock(impl_->mu);
  const auto a = impl_->assumed.find(key);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& n : args.node_names)
    out.emplace_back(n, a != impl_->assumed.end() && a->second.node == n ? kMaxExtenderPriority : 0);
  return out;
}

std::string GpuScheduler::bind(const BindingArgs& args) {
  auto& im = *impl_;
  const auto started = im.clock.steady_now();
  const std::string key = args.pod_uid.empty() ? args.pod_namespace + "/" + args.pod_name : args.pod_uid;
  json annotations = json::object();
  std::string gpus_text;
  const auto finish = [&](const char* result, std::string error) {
    im.metrics.observe_bind(result, im.clock.steady_now() - started);
    return error;
  };
  {
    std::lock_guard lock(im.mu);
    im.maybe_refresh();
    ++im.st.binds;
    auto a = im.assumed.find(key);
    if (a == im.assumed.end() || a->second.node != args.node) {
      ++im.st.bind_errors;
      return finish("no_choice", fmt::format("kgpu scheduler: no GPU choice for pod {}/{} on node {} (filter was not "
                                             "called, chose another node, or the choice expired); retry",
                                             args.pod_namespace, args.pod_name, args.node));
    }
    Impl::Assumed& as = a->second;
    if (im.opt.serialize_admission) {
      const auto now = im.clock.system_now();
      const auto same_request = [&](const std::vector<ContainerRequest>& other) {
        for (const auto& c : as.containers)
          for (const auto& o : other)
            if (c.units == o.units) return true;
        return false;
      };
      std::string blocker;
      if (const auto on = im.pods_on_node.find(args.node); on != im.pods_on_node.end()) {
        for (const auto& uid : on->second) {
          const auto& p = im.pods.at(uid);
          if (uid == key || !p.holds || p.allocated || p.assigned.empty() || p.resource != as.resource) continue;
          if (now - p.bound_at > im.opt.admission_wait) continue;
          if (same_request(p.containers)) blocker = p.ns + "/" + p.name;
        }
      }
      for (const auto& [uid, other] : im.assumed)
        if (uid != key && other.bound && other.node == args.node && other.resource == as.resource &&
            now - other.bound_at <= im.opt.admission_wait && same_request(other.containers))
          blocker = uid;
      if (!blocker.empty()) {
        std::string error = fmt::format(
            "kgpu scheduler: node {} is still admitting pod {} with an equal {} request; the agent could not tell "
            "the two apart, so this pod waits (retry)",
            args.node, blocker, as.resource);
        im.assumed.erase(a);
        im.charge(key);
        ++im.st.bind_errors;
        return finish("admission_wait", std::move(error));
      }
    }
    as.bound = true;
    as.bound_at = im.clock.system_now();
    const Impl::Pool* pool = im.pool_for(as.resource);
    const bool share = pool != nullptr && pool->replicas > 1 && as.uuids.size() == 1;
    annotations[k8s::kAnnotationGpuResource] = as.resource;
    // A share of several whole GPUs (k a multiple of R) splits like whole GPUs, counted in GPUs.
    auto containers = as.containers;
    if (as.uuids.size() > 1) {
      const int64_t per_gpu = std::max<int64_t>(1, as.units / static_cast<int64_t>(as.uuids.size()));
      for (auto& c : containers) c.units = std::max<int64_t>(1, c.units / per_gpu);
    }
    annotations[k8s::kAnnotationGpuAssignment] = k8s::format_assignment(split_assignment(containers, as.uuids, share));
    annotations[k8s::kAnnotationBoundAt] = format_rfc3339(as.bound_at, 6);
    gpus_text = gpu_list(as.uuids);
  }
  std::string error;
  const char* result = "bound";
  if (im.client == nullptr) {
    error = "kgpu scheduler: no API client";
    result = "error";
  } else if (auto r = im.client->bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node, annotations); !r) {
    error = "kgpu scheduler: binding " + args.pod_namespace + "/" + args.pod_name + ": " + r.error().text();
    result = r.error().conflict() ? "conflict" : "error";
  }
  {
    std::lock_guard lock(im.mu);
    if (!error.empty()) {
      im.assumed.erase(key);
      im.charge(key);
      ++im.st.bind_errors;
    }
  }
  if (error.empty() && im.events != nullptr)
    im.events->record(kube::EventTarget{"v1", "Pod", args.pod_namespace, args.pod_name, args.pod_uid}, "Normal",
                      "GPUsAssigned", "Binding",
                      fmt::format("kgpu assigned {} GPU(s) {} on node {}", annotations[k8s::kAnnotationGpuResource].get<std::string>(),
                                  gpus_text, args.node));
  if (!error.empty()) log::warn("bind failed", {log::kv("pod", args.pod_namespace + "/" + args.pod_name), log::kv("error", error)});
  return finish(result, error);
}

PreemptDecision GpuScheduler::preempt(const PreemptionArgs& args) {
  PreemptDecision d;
  std::optional<sched::Pod> spec;
  Impl::PodInfo info = Impl::pod_info(args.pod, &spec);
  std::lock_guard lock(impl_->mu);
  auto& im = *impl_;
  im.maybe_refresh();
  ++im.st.preempts;
  if (info.resource.empty()) {
    d.kept = args.victims;
    return d;
  }
  Impl::Pool* pool = im.pool_for(info.resource);
  std::optional<sched::Pod> sp;
  if (pool != nullptr) sp = Impl::pod_for_pool(std::move(spec), *pool, info.units);
  if (!sp) return d;
  const auto filters = sched::default_filters();
  for (const auto& [node, victims] : args.victims) {
    const auto idx = pool->node_index.find(node);
    if (idx == pool->node_index.end()) {
      im.metrics.count_preempt_node(false);
      continue;
    }
    // The node as it would be without the victims.
    sched::Cluster scratch({pool->cluster->node(idx->second)});
    for (const auto& uid : victims.uids) {
      const auto ap = im.applied.find(uid);
      if (ap == im.applied.end()) continue;
      for (const auto& x : ap->second) {
        if (&im.pools[x.pool] != pool || x.placement.node != idx->second) continue;
        scratch.release(x.pod, sched::Placement{0, x.placement.gpus});
      }
    }
    const bool fits = sched::run_filters(filters, *sp, scratch.node(0)).fits() &&
                      sched::default_gpus(*sp, scratch.node(0)).has_value();
    im.metrics.count_preempt_node(fits);
    if (fits) d.kept[node] = victims;
  }
  return d;
}

std::string GpuScheduler::metrics_text() {
  std::lock_guard lock(impl_->mu);
  auto& im = *impl_;
  im.maybe_refresh();
  std::vector<PoolGauges> pools;
  for (const auto& p : im.pools) {
    PoolGauges g;
    g.resource = p.resource;
    g.capacity_milli = p.cluster->gpu_capacity();
    g.allocated_milli = p.cluster->gpu_allocated();
    g.fragmentation = sched::cluster_fragmentation(*p.cluster, p.workload).ratio();
    g.nodes = p.cluster->nodes().size();
    pools.push_back(std::move(g));
  }
  std::map<std::string, uint64_t> pending;
  for (const auto& [uid, p] : im.pods) {
    if (p.resource.empty() || !p.node.empty() || p.deleting) continue;
    std::string reason = p.gated ? "SchedulingGated" : "NotAttempted";
    if (const auto r = im.pending_reason.find(uid); r != im.pending_reason.end()) reason = r->second;
    if (im.assumed.contains(uid)) reason = "Binding";
    ++pending[reason];
  }
  uint64_t reported = 0;
  for (const auto& [name, n] : im.nodes) reported += n.report.has_value();
  return im.metrics.render(pools, pending, reported, im.nodes.size() - reported);
}

SchedulerStats GpuScheduler::stats() const {
  std::lock_guard lock(impl_->mu);
  return impl_->st;
}

std::map<std::string, std::vector<std::string>> GpuScheduler::charges_on(const std::string& node) const {
  std::lock_guard lock(impl_->mu);
  auto& im = *impl_;
  if (im.dirty) im.rebuild();
  std::map<std::string, std::vector<std::string>> out;
  for (const auto& [key, list] : im.applied) {
    for (const auto& ap : list) {
      const auto& pool = im.pools[ap.pool];
      if (pool.cluster->node(ap.placement.node).name != node) continue;
      for (int g : ap.placement.gpus) out[key].push_back(pool.uuids[ap.placement.node][g]);
    }
  }
  for (auto& [k, v] : out) std::sort(v.begin(), v.end());
  std::erase_if(out, [](const auto& kv) { return kv.second.empty(); });
  return out;
}

std::pair<int64_t, int64_t> GpuScheduler::allocation(const std::string& resource) const {
  std::lock_guard lock(impl_->mu);
  auto& im = *impl_;
  if (im.dirty) im.rebuild();
  for (const auto& p : im.pools)
    if (p.resource == resource) return {p.cluster->gpu_allocated(), p.cluster->gpu_capacity()};
  return {0, 0};
}

}  // namespace kgpu::scheduler
