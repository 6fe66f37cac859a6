#include "scheduler/gang_admission.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "apiclient/client.h"
#include "apiclient/events.h"
#include "common/log.h"
#include "k8s/api/json.h"
#include "scheduler/gang.h"
#include "scheduler/queues.h"

namespace kgpu::scheduler {

namespace {

using nlohmann::json;

using k8s::api::text;

// A PodGroup's minimum is read again at most this often (a gang waits many rounds for members).
constexpr std::chrono::seconds kPodGroupTtl{10};

struct Members {
  GangRef ref;
  std::vector<const json*> pods;
  std::string oldest;  // creationTimestamp (RFC 3339 sorts as text)
};

}  // namespace

GangAdmission::GangAdmission(GpuScheduler& scheduler, kube::Client& client, kube::EventRecorder* events,
                             GangAdmissionOptions o)
    : sched_(scheduler), client_(client), events_(events), opt_(o) {}

void GangAdmission::event(const json& pod, bool warning, const std::string& reason, const std::string& note) {
  pod_event(events_, pod, warning, reason, note);
}

bool GangAdmission::admit(const json& pod) {
  const std::string ns = text(pod, {"metadata", "namespace"}), name = text(pod, {"metadata", "name"});
  kube::ApiResult<json> r = [&] {
    if (has_gang_gate(pod)) return remove_scheduling_gate(client_, pod, kGangGate);
    const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(opt_.clock->system_now().time_since_epoch());
    return client_.patch(kube::resources::kPods, ns, name, kube::PatchType::kMerge,
                         {{"metadata", {{"annotations", {{kGangReservationAnnotation, std::to_string(now.count())}}}}}});
  }();
  if (!r) {
    log::warn("gang admission: releasing the pod failed",
              {log::kv("pod", ns + "/" + name), log::kv("error", r.error().text())});
    return false;
  }
  return true;
}

GangRound GangAdmission::round(const std::vector<kube::ObjectRef>& pods) {
  GangRound out;
  const auto now = opt_.clock->steady_now();
  std::map<std::string, Members> gangs;
  std::set<std::string> present;  // uids of unfinished gang members
  std::set<std::string> invalid;  // uids of unfinished pods whose gang markers are wrong
  std::set<std::string> listed;
  for (const auto& ref : pods) {
    const json& p = *ref;
    const std::string uid = text(p, {"metadata", "uid"});
    listed.insert(uid);
    if (pod_finished(p) || evicted_.contains(uid)) continue;
    const std::string rv = text(p, {"metadata", "resourceVersion"});
    auto cached = gang_of_.find(uid);
    if (cached == gang_of_.end() || rv.empty() || cached->second.first != rv) {
      cached = gang_of_.insert_or_assign(uid, std::make_pair(rv, gang_of(p))).first;
    }
    const auto& g = cached->second.second;
    if (!g) {
      invalid.insert(uid);
      if (said_[uid] != g.error().message) {
        said_[uid] = g.error().message;
        event(p, true, "GangInvalid", g.error().message);
      }
      continue;
    }
    if (!*g) continue;
    present.insert(uid);
    auto& m = gangs[(*g)->key];
    if (m.pods.empty()) m.ref = **g;
    if (!m.ref.min_count && (*g)->min_count) m.ref.min_count = (*g)->min_count;
    m.pods.push_back(&p);
    const std::string created = text(p, {"metadata", "creationTimestamp"});
    if (m.oldest.empty() || created < m.oldest) m.oldest = created;
  }
  // Reservations first: admitted, released or timed out.
  for (auto it = gangs_.begin(); it != gangs_.end();) {
    const std::string& key = it->first;
    Reservation& r = it->second;
    const auto g = gangs.find(key);
    const bool member_gone = std::ranges::any_of(r.members, [&](const std::string& u) { return !present.contains(u); });
    std::vector<const json*> bound, unbound;
    if (g != gangs.end()) {
      for (const json* p : g->second.pods) {
        if (!r.members.contains(text(*p, {"metadata", "uid"}))) continue;
        (text(*p, {"spec", "nodeName"}).empty() ? unbound : bound).push_back(p);
      }
    }
    if (member_gone) {
      sched_.release_gang(key);
      out.released.push_back(key);
      for (const json* p : unbound) event(*p, false, "GangReleased", fmt::format("gang {}: a member was deleted before the gang was placed; its reservation is released and it waits to be complete again", key));
      it = gangs_.erase(it);
      continue;
    }
    if (unbound.empty()) {
      out.admitted.push_back(key);
      for (const json* p : bound) event(*p, false, "GangAdmitted", fmt::format("gang {}: all {} members placed", key, bound.size()));
      it = gangs_.erase(it);
      continue;
    }
    if (now > r.deadline) {
      sched_.release_gang(key);
      out.timed_out.push_back(key);
      const std::string why = fmt::format("gang {}: {} of {} members not placed within {} ms; the reservation is released and the {} placed are evicted",
                                          key, unbound.size(), r.members.size(), opt_.timeout.count(), bound.size());
      for (const json* p : unbound) event(*p, true, "GangTimedOut", why);
      for (const json* p : bound) {
        event(*p, true, "GangTimedOut", why);
        // Left out of later rounds only once gone: a member the API would not evict (a
        // PodDisruptionBudget, an error) still holds its GPUs.
        auto e = evict_pod(client_, *p);
        if (e) evicted_.insert(text(*p, {"metadata", "uid"}));
        if (!e) {
          log::warn("gang admission: evicting a member failed",
                    {log::kv("gang", key), log::kv("pod", text(*p, {"metadata", "name"})), log::kv("error", e.error().text())});
        }
      }
      it = gangs_.erase(it);
      continue;
    }
    ++it;
  }
  // Gangs to admit, oldest first; one released in this round waits for the next (the informer has
  // to show its evictions first).
  std::set<std::string> released(out.released.begin(), out.released.end());
  released.insert(out.timed_out.begin(), out.timed_out.end());
  std::vector<Members*> order;
  for (auto& [key, m] : gangs)
    if (!gangs_.contains(key) && !released.contains(key)) order.push_back(&m);
  std::ranges::stable_sort(order, [](const Members* a, const Members* b) { return a->oldest < b->oldest; });
  for (Members* m : order) {
    const std::string& key = m->ref.key;
    std::vector<const json*> pending;
    size_t bound = 0;
    for (const json* p : m->pods) {
      if (text(*p, {"spec", "nodeName"}).empty()) {
        pending.push_back(p);
      } else {
        ++bound;
      }
    }
    if (pending.empty()) continue;
    const auto tell = [&](bool warning, const std::string& reason, const std::string& why) {
      out.waiting[key] = why;
      if (said_[key] == why) return;
      said_[key] = why;
      for (const json* p : pending) event(*p, warning, reason, why);
    };
    // A gang in a quota queue is planned once the queue admitted it (queue_admission.h).
    if (std::ranges::any_of(pending, [](const json* p) { return has_gang_gate(*p, queues::kQueueGate); })) {
      out.waiting[key] = "waits for its queue to admit it";
      continue;
    }
    std::optional<int64_t> min = m->ref.min_count;
    if (!min) {
      if (m->ref.podgroup.plural.empty()) {
        tell(true, "GangInvalid", fmt::format("gang {}: no minimum member count", key));
        continue;
      }
      if (const auto read = podgroup_min_.find(key); read != podgroup_min_.end() && now - read->second.first < kPodGroupTtl) {
        min = read->second.second;
      }
    }
    if (!min) {
      auto pg = client_.get(m->ref.podgroup, m->ref.ns, m->ref.group);
      if (!pg) {
        tell(false, "GangWaiting",
             fmt::format("gang {}: waits for its {} ({}): {}", key, m->ref.podgroup.kind, m->ref.podgroup.api_version(),
                         pg.error().not_found() ? "not found (or the API is not served)" : pg.error().text()));
        continue;
      }
      auto v = podgroup_min_count(m->ref, *pg);
      if (!v) {
        tell(true, "GangInvalid", v.error().message);
        continue;
      }
      min = *v;
      podgroup_min_[key] = {now, *v};
    }
    if (static_cast<int64_t>(m->pods.size()) < *min) {
      tell(false, "GangWaiting", fmt::format("gang {}: {} of its {} members exist", key, m->pods.size(), *min));
      continue;
    }
    std::vector<json> members;
    for (const json* p : pending) members.push_back(*p);
    const GangPlan plan = sched_.reserve_gang(key, members, now + opt_.timeout);
    if (!plan.reserved) {
      if (plan.never) {
        tell(true, "GangUnschedulable", fmt::format("gang {} cannot be placed: {}", key, plan.reason));
      } else {
        tell(false, "GangWaiting", fmt::format("gang {} does not fit now ({} placed, {} waiting): {}", key, bound,
                                               pending.size(), plan.reason));
      }
      continue;
    }
    Reservation r;
    r.deadline = now + opt_.timeout;
    for (const json* p : pending) r.members.insert(text(*p, {"metadata", "uid"}));
    bool ok = true;
    for (const json* p : pending) ok = admit(*p) && ok;
    if (!ok) {
      // Gates left on some members: they cannot bind; the reservation goes, the next round retries.
      sched_.release_gang(key);
      out.waiting[key] = "releasing the members failed";
      continue;
    }
    std::vector<std::string> where;
    for (const auto& [uid, node] : plan.nodes) where.push_back(node);
    std::ranges::sort(where);
    const std::string note = fmt::format("gang {}: all {} members placed at once{}", key, pending.size(),
                                         where.empty() ? std::string() : " on " + fmt::format("{}", fmt::join(where, ",")));
    for (const json* p : pending) event(*p, false, "GangReserved", note);
    said_.erase(key);
    gangs_[key] = std::move(r);
    out.reserved.push_back(key);
    log::info("gang reserved", {log::kv("gang", key), log::kv("members", pending.size())});
  }
  std::erase_if(evicted_, [&](const std::string& uid) { return !listed.contains(uid); });
  std::erase_if(gang_of_, [&](const auto& kv) { return !listed.contains(kv.first); });
  std::erase_if(podgroup_min_, [&](const auto& kv) { return !gangs.contains(kv.first); });
  // Forget what was told about gangs and pods no longer there.
  for (auto it = said_.begin(); it != said_.end();) {
    if (!gangs.contains(it->first) && !invalid.contains(it->first)) {
      it = said_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace kgpu::scheduler
