#include "scheduler/scheduler.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/log.h"
#include "common/timestamp.h"
#include "k8s/api/json.h"
#include "k8s/gpu_assignment.h"
#include "k8s/objects.h"
#include "apiclient/client.h"
#include "apiclient/events.h"
#include "framework/k8s_adapter.h"
#include "scheduler/gang.h"
#include "scheduler/model.h"

namespace kgpu::scheduler {

using nlohmann::json;
using namespace detail;

// GFD's label for a node's NVLink domain (multi-node NVLink): <cluster UUID>.<clique ID>.
constexpr const char* kCliqueLabel = "nvidia.com/gpu.clique";

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

ClaimAllocator& GpuScheduler::claims() { return impl_->claims; }

void GpuScheduler::upsert_node(const json& node) {
  auto obj = k8s::api::decode_node(node);
  if (!obj || obj->name.empty()) return;
  const std::string name = obj->name;
  Impl::NodeInfo info;
  info.base = sched::node_from_k8s(obj->doc, obj->view);
  info.base.name = name;
  info.report = std::move(obj->report);
  if (!obj->report_error.empty()) info.report_error = "node " + name + ": " + obj->report_error;
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
  auto obj = k8s::api::decode_pod(pod);
  if (!obj) return;
  Impl::PodInfo p = Impl::pod_info(*obj);
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
  const std::string uid = k8s::api::text(pod, {"metadata", "uid"});
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
  im.claims.forget_pod(uid);
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
  auto obj = k8s::api::decode_pod(args.pod);
  Impl::PodInfo info = obj ? Impl::pod_info(*obj, &spec) : Impl::PodInfo{};
  std::optional<std::pair<kube::EventTarget, std::string>> warn;
  // A value kube-apiserver would refuse is this pod's error, never a request of 0.
  if (!obj || obj->invalid) {
    d.result.error = obj ? fmt::format("kgpu scheduler: pod {}/{}: {}", info.ns, info.name, *obj->invalid)
                         : "kgpu scheduler: " + obj.error().message;
    auto& im = *impl_;
    std::lock_guard lock(im.mu);
    ++im.st.filters;
    ++im.st.errors;
    im.metrics.observe_filter("error", im.clock.steady_now() - started);
    return d;
  }
  if (ClaimAllocator::has_claims(args.pod)) {
    auto& im = *impl_;
    std::string reason;
    if (!info.resource.empty()) {
      const std::string why =
          fmt::format("kgpu does not place a pod that asks for both {} and ResourceClaims; ask for the GPUs one way",
                      info.resource);
      for (const auto& n : args.node_names) d.result.unresolvable[std::string(n)] = why;
      d.message = fmt::format("0/{} nodes are available: {}", args.node_names.size(), why);
      reason = "ClaimsAndExtendedResources";
    } else {
      ClaimFilterResult c = im.claims.filter(args.pod, args.node_names);
      if (c.node) d.result.nodes = {*c.node};
      d.node = c.node;
      d.result.failed = std::move(c.failed);
      d.result.unresolvable = std::move(c.unresolvable);
      d.message = std::move(c.message);
      reason = std::move(c.reason);
    }
    {
      std::lock_guard lock(im.mu);
      ++im.st.filters;
      if (d.node) {
        ++im.st.scheduled;
        im.metrics.observe_filter("scheduled", im.clock.steady_now() - started);
        return d;
      }
      ++im.st.unschedulable;
      im.metrics.observe_filter("unschedulable", im.clock.steady_now() - started);
    }
    if (im.events != nullptr)
      im.events->record(kube::EventTarget{"v1", "Pod", info.ns, info.name, info.uid}, "Warning", "FailedScheduling",
                        "Scheduling", "kgpu: " + d.message);
    log::debug("claims cannot be allocated",
               {log::kv("pod", info.ns + "/" + info.name), log::kv("reason", reason), log::kv("message", d.message)});
    return d;
  }
  // Read before the lock: the pod's gang markers (most pods have none).
  const auto gang = info.resource.empty() ? Result<std::optional<GangRef>>(std::nullopt) : gang_of(args.pod);
  {
    std::lock_guard lock(impl_->mu);
    auto& im = *impl_;
    im.maybe_refresh();
    ++im.st.filters;
    if (info.resource.empty()) {  // not a GPU pod (managedResources empty): no opinion
      d.result.nodes.assign(args.node_names.begin(), args.node_names.end());
      d.message = "no GPU requested";
      im.metrics.observe_filter("passed", im.clock.steady_now() - started);
      return d;
    }
    // A gang member goes where its gang's reservation put it, or nowhere yet.
    if (!gang || *gang) {
      const std::string key = info.uid.empty() ? info.ns + "/" + info.name : info.uid;
      const auto a = im.assumed.find(key);
      std::string why;
      if (!gang) {
        why = gang.error().message;
      } else if (a != im.assumed.end() && !a->second.gang.empty()) {
        if (std::ranges::find(args.node_names, a->second.node) != args.node_names.end()) {
          d.node = a->second.node;
          d.gpus = a->second.uuids;
          d.result.nodes = {a->second.node};
          d.message = fmt::format("{}/{} on {} (GPUs {}), as gang {} planned", info.ns, info.name, a->second.node,
                                  gpu_list(d.gpus), a->second.gang);
          ++im.st.scheduled;
          im.metrics.observe_filter("scheduled", im.clock.steady_now() - started);
          return d;
        }
        why = fmt::format("gang {} planned node {} for this pod, and kube-scheduler did not pass it", a->second.gang,
                          a->second.node);
      } else {
        why = fmt::format("waits for its gang {} to be admitted whole", (*gang)->key);
      }
      for (const auto& n : args.node_names) d.result.failed[std::string(n)] = why;
      d.message = fmt::format("0/{} nodes are available: {}", args.node_names.size(), why);
      ++im.st.unschedulable;
      im.metrics.observe_filter("unschedulable", im.clock.steady_now() - started);
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
    if (!std::ranges::equal(args.node_names, pool->last_candidates)) {
      pool->last_allowed.assign(pool->cluster->nodes().size(), 0);
      pool->last_unknown.clear();
      for (size_t i = 0; i < args.node_names.size(); ++i) {
        const auto it = pool->node_index.find(std::string(args.node_names[i]));  // only when the list changed
        if (it != pool->node_index.end()) {
          pool->last_allowed[it->second] = 1;
        } else {
          pool->last_unknown.push_back(i);
        }
      }
      pool->last_candidates.assign(args.node_names.begin(), args.node_names.end());
    }
    const std::vector<char>& allowed = pool->last_allowed;
    for (const size_t i : pool->last_unknown) {
      const std::string name(args.node_names[i]);
      const auto n = im.nodes.find(name);
      std::string why =
          n == im.nodes.end() ? "node unknown to kgpu"
          : !n->second.report
              ? (n->second.report_error.empty() ? "no kgpu agent report (" + std::string(k8s::kAnnotationNodeGpus) + ")"
                                                : n->second.report_error)
              : "no healthy GPU advertised as " + info.resource;
      d.result.unresolvable[name] = why;
    }
    sched::Outcome out = pool->framework->schedule(*sp, *pool->cluster, im.rng, &allowed);
    if (out.placement) {
      Impl::Assumed a = im.choose(info, *sp, *pool, *out.placement);
      const std::string node_name = a.node;
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
    const std::string top = im.explain(*pool, *sp, allowed, args.node_names.size(), d);
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
  const std::string uid = k8s::api::text(args.pod, {"metadata", "uid"});
  const std::string key = uid.empty() ? k8s::api::text(args.pod, {"metadata", "namespace"}) + "/" +
                                            k8s::api::text(args.pod, {"metadata", "name"})
                                      : uid;
  const auto claims = impl_->claims.choice(key);
  std::lock_guard lock(impl_->mu);
  const auto a = impl_->assumed.find(key);
  std::vector<std::pair<std::string, int64_t>> out;
  for (const auto& n : args.node_names) {
    const bool chosen = (a != impl_->assumed.end() && a->second.node == n) || (claims && claims->node == n);
    out.emplace_back(std::string(n), chosen ? kMaxExtenderPriority : 0);
  }
  return out;
}

GangPlan GpuScheduler::reserve_gang(const std::string& gang, const std::vector<json>& members,
                                   Clock::SteadyTime deadline) {
  auto& im = *impl_;
  GangPlan plan;
  struct Member {
    Impl::PodInfo info;
    std::optional<sched::Pod> spec;
  };
  std::vector<Member> ms;
  for (const auto& m : members) {
    auto obj = k8s::api::decode_pod(m);
    if (!obj || obj->invalid) {
      plan.reason = obj ? *obj->invalid : obj.error().message;
      plan.never = true;
      return plan;
    }
    Member x;
    x.info = Impl::pod_info(*obj, &x.spec);
    if (!x.info.resource.empty()) ms.push_back(std::move(x));
  }
  // Largest requests first: the hardest to place decide whether the gang fits.
  std::stable_sort(ms.begin(), ms.end(), [](const Member& a, const Member& b) { return a.info.units > b.info.units; });
  std::lock_guard lock(im.mu);
  im.maybe_refresh();
  std::vector<std::string> held;
  const auto undo = [&] {
    for (const auto& k : held) {
      im.assumed.erase(k);
      im.charge(k);
    }
    held.clear();
    plan.nodes.clear();
  };
  // A gang asking more than a pool holds empty, or a member larger than its largest node, never fits.
  std::map<std::string, int64_t> asked;
  for (size_t i = 0; i < ms.size(); ++i) {
    const auto& m = ms[i];
    const Impl::Pool* pool = im.pool_for(m.info.resource);
    if (pool == nullptr || !pool->framework) continue;  // said below
    const auto sp = Impl::pod_for_pool(m.spec, *pool, m.info.units);
    if (!sp) continue;
    asked[m.info.resource] += sp->gpu_request();
    int64_t capacity = 0, largest = 0;
    for (const auto& n : pool->cluster->nodes()) {
      capacity += static_cast<int64_t>(n.gpu_free.size()) * sched::kMilli;
      largest = std::max<int64_t>(largest, static_cast<int64_t>(n.gpu_free.size()) * sched::kMilli);
    }
    const std::string who = fmt::format("member {} of {} ({}/{})", i + 1, ms.size(), m.info.ns, m.info.name);
    if (sp->gpu_request() > largest) {
      plan.never = true;
      plan.reason = fmt::format("{} asks {:.2f} GPUs of {} and the largest node has {}", who,
                                static_cast<double>(sp->gpu_request()) / sched::kMilli, m.info.resource,
                                largest / sched::kMilli);
      return plan;
    }
    if (asked[m.info.resource] > capacity) {
      int64_t total = 0;
      for (const auto& x : ms) {
        if (x.info.resource != m.info.resource) continue;
        if (auto q = Impl::pod_for_pool(x.spec, *pool, x.info.units)) total += q->gpu_request();
      }
      plan.never = true;
      plan.reason = fmt::format("the gang asks {:.2f} GPUs of {} and the cluster has {}",
                                static_cast<double>(total) / sched::kMilli, m.info.resource, capacity / sched::kMilli);
      return plan;
    }
  }
  // Every member placed (nothing held on failure); with `domain`, only on nodes of that NVLink
  // domain (label nvidia.com/gpu.clique). Returns "" when placed, else why not.
  const auto place_all = [&](const std::string* domain) -> std::string {
    for (size_t i = 0; i < ms.size(); ++i) {
      auto& m = ms[i];
      const std::string who = fmt::format("member {} of {} ({}/{})", i + 1, ms.size(), m.info.ns, m.info.name);
      Impl::Pool* pool = im.pool_for(m.info.resource);
      std::optional<sched::Pod> sp;
      if (pool != nullptr) sp = Impl::pod_for_pool(m.spec, *pool, m.info.units);
      if (pool == nullptr || !pool->framework || !sp) {
        undo();
        plan.never = true;
        return fmt::format("{}: no node advertises {} to kgpu", who, m.info.resource);
      }
      sp->name = m.info.ns + "/" + m.info.name;
      std::vector<char> allowed;
      if (domain != nullptr) {
        for (const auto& n : pool->cluster->nodes()) {
          const auto it = n.labels.find(kCliqueLabel);
          allowed.push_back(it != n.labels.end() && it->second == *domain ? 1 : 0);
        }
      }
      sched::Outcome out = pool->framework->schedule(*sp, *pool->cluster, im.rng, domain ? &allowed : nullptr);
      if (!out.placement) {
        undo();
        return fmt::format("{}: no node has room for it beside the members placed before it", who);
      }
      Impl::Assumed a = im.choose(m.info, *sp, *pool, *out.placement);
      a.gang = gang;
      a.deadline = deadline;
      const std::string key = m.info.uid.empty() ? a.pod : m.info.uid;
      plan.nodes[key] = a.node;
      im.assumed[key] = std::move(a);
      im.charge(key);
      held.push_back(key);
    }
    return "";
  };
  // Multi-node gangs prefer one NVLink domain: the domains with the most free GPUs first, then
  // any nodes.
  std::map<std::string, int64_t> domains;
  if (ms.size() > 1) {
    for (const auto& m : ms) {
      const Impl::Pool* pool = im.pool_for(m.info.resource);
      if (pool == nullptr || !pool->cluster) continue;
      for (const auto& n : pool->cluster->nodes()) {
        const auto it = n.labels.find(kCliqueLabel);
        if (it == n.labels.end() || it->second.empty()) continue;
        int64_t free = 0;
        for (const int f : n.gpu_free) free += f;
        domains[it->second] += free;
      }
      break;  // the largest member's pool
    }
  }
  std::vector<std::pair<int64_t, std::string>> by_room;
  for (const auto& [d, free] : domains) by_room.emplace_back(-free, d);
  std::ranges::sort(by_room);
  for (const auto& [_, d] : by_room) {
    if (place_all(&d).empty()) {
      plan.reserved = true;
      plan.domain = d;
      return plan;
    }
  }
  plan.reason = place_all(nullptr);
  if (!plan.reason.empty()) return plan;
  plan.reserved = true;
  return plan;
}

size_t GpuScheduler::release_gang(const std::string& gang) {
  auto& im = *impl_;
  std::lock_guard lock(im.mu);
  std::vector<std::string> keys;
  for (const auto& [k, a] : im.assumed)
    if (a.gang == gang && !a.bound) keys.push_back(k);
  for (const auto& k : keys) {
    im.assumed.erase(k);
    im.charge(k);
  }
  return keys.size();
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
  if (const auto claims = im.claims.choice(key)) return bind_claims(args, *claims);
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
          blocker = other.pod;
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
                      fmt::format("kgpu assigned {} GPU(s) {} on node {}",
                                  annotations[k8s::kAnnotationGpuResource].get<std::string>(), gpus_text, args.node));
  if (!error.empty())
    log::warn("bind failed", {log::kv("pod", args.pod_namespace + "/" + args.pod_name), log::kv("error", error)});
  return finish(result, error);
}

std::string GpuScheduler::bind_claims(const BindingArgs& args, const PodClaimChoice& choice) {
  auto& im = *impl_;
  const auto started = im.clock.steady_now();
  const std::string key = args.pod_uid.empty() ? args.pod_namespace + "/" + args.pod_name : args.pod_uid;
  {
    std::lock_guard lock(im.mu);
    ++im.st.binds;
  }
  std::string error;
  const char* result = "bound";
  if (choice.node != args.node) {
    error = fmt::format("kgpu scheduler: the ResourceClaims of pod {}/{} were chosen on node {}, not {}; retry",
                        args.pod_namespace, args.pod_name, choice.node, args.node);
    result = "no_choice";
  } else if (im.client == nullptr) {
    error = "kgpu scheduler: no API client";
    result = "error";
  } else if (error = im.claims.reserve(*im.client, args.pod_namespace, args.pod_name, args.pod_uid, args.node);
             !error.empty()) {
    result = "error";
  } else if (auto r = im.client->bind(args.pod_namespace, args.pod_name, args.pod_uid, args.node); !r) {
    error = "kgpu scheduler: binding " + args.pod_namespace + "/" + args.pod_name + ": " + r.error().text();
    result = r.error().conflict() ? "conflict" : "error";
    im.claims.unreserve(*im.client, key);
  }
  {
    std::lock_guard lock(im.mu);
    if (!error.empty()) ++im.st.bind_errors;
    im.metrics.observe_bind(result, im.clock.steady_now() - started);
  }
  if (!error.empty()) {
    log::warn("bind failed", {log::kv("pod", args.pod_namespace + "/" + args.pod_name), log::kv("error", error)});
    return error;
  }
  if (im.events != nullptr) {
    std::vector<std::string> devices;
    for (const auto& c : choice.claims)
      for (const auto& [req, id] : c.results) devices.push_back(fmt::format("{}/{}:{}", c.name, req, id.device));
    im.events->record(kube::EventTarget{"v1", "Pod", args.pod_namespace, args.pod_name, args.pod_uid}, "Normal",
                      "ResourceClaimsAllocated", "Binding",
                      fmt::format("kgpu allocated {} on node {}", gpu_list(devices), args.node));
  }
  return "";
}

PreemptDecision GpuScheduler::preempt(const PreemptionArgs& args) {
  PreemptDecision d;
  std::optional<sched::Pod> spec;
  auto obj = k8s::api::decode_pod(args.pod);
  Impl::PodInfo info = obj ? Impl::pod_info(*obj, &spec) : Impl::PodInfo{};
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
    const bool fits = sched::run_filters(im.filters, *sp, scratch.node(0)).fits() &&
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
