#include "scheduler/queues.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "common/yaml_load.h"
#include "k8s/api/json.h"
#include "k8s/api/objects.h"
#include "k8s/objects.h"
#include "k8s/quantity.h"
#include "scheduler/gang.h"

namespace kgpu::scheduler::queues {

namespace {

constexpr size_t kMaxQueues = 1000;
constexpr size_t kMaxQuotas = 64;
constexpr size_t kMaxNamespaces = 1000;  // per queue
constexpr int64_t kMaxQuota = int64_t{1} << 40;

struct Reader : YamlReader {
  Result<std::string> text(const YAML::Node& n, const std::string& field, bool required) const {
    if (!n) {
      if (required) return fail(ErrorCode::kInvalidArgument, "{}: {}: required", source, field);
      return std::string();
    }
    if (!n.IsScalar()) return bad(n, field, "want a string");
    return n.as<std::string>();
  }
  Result<int64_t> count(const YAML::Node& n, const std::string& field) const {
    if (!n.IsScalar()) return bad(n, field, "want a whole number");
    const std::string s = n.as<std::string>();
    int64_t v = 0;
    size_t used = 0;
    try {
      v = std::stoll(s, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != s.size()) return bad(n, field, "{:?} is not a whole number", s.substr(0, 32));
    if (v < 0) return bad(n, field, "{} is negative", v);
    if (v > kMaxQuota) return bad(n, field, "{} is more than {}", v, kMaxQuota);
    return v;
  }
};

bool dns_label(const std::string& s) {
  if (s.empty() || s.size() > 63) return false;
  for (const char c : s)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  return s.front() != '-' && s.back() != '-';
}

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max() / 4;

const Quota* quota_for(const ClusterQueue& q, const Key& k) {
  const Quota* any = nullptr;
  for (const auto& x : q.quotas) {
    if (x.resource != k.first) continue;
    if (x.model == k.second) return &x;
    if (x.model.empty()) any = &x;
  }
  return any;
}

// The quota key a request counts against in queue q: its own model's, else the resource's.
Key quota_key(const ClusterQueue& q, const Key& k) {
  const Quota* x = quota_for(q, k);
  return x ? Key{x->resource, x->model} : k;
}

}  // namespace

// Usage of the admitted workloads by queue, and the quota checks over it.
struct State {
  const Config& c;
  std::map<std::string, Amounts> used;  // queue -> quota key -> used

  int64_t use(const std::string& q, const Key& k) const {
    const auto it = used.find(q);
    if (it == used.end()) return 0;
    const auto j = it->second.find(k);
    return j == it->second.end() ? 0 : j->second;
  }
  // What queue `o` lends of key k now.
  int64_t lendable(const ClusterQueue& o, const Key& k) const {
    const Quota* x = quota_for(o, k);
    if (x == nullptr || !(x->resource == k.first && x->model == k.second)) return 0;
    const int64_t unused = std::max<int64_t>(0, x->nominal - use(o.name, k));
    return std::min(unused, x->lending_limit.value_or(kNoLimit));
  }
  int64_t pool(const ClusterQueue& q, const Key& k) const {
    if (q.cohort.empty()) return 0;
    int64_t p = 0;
    for (const auto& o : c.queues)
      if (o.name != q.name && o.cohort == q.cohort) p += lendable(o, k);
    return p;
  }
  // Whether w fits q now (the quota check of admit()).
  bool fits(const ClusterQueue& q, const Workload& w) const {
    for (const auto& [raw, amount] : w.request) {
      const Quota* x = quota_for(q, raw);
      if (x == nullptr) return false;
      const Key k{x->resource, x->model};
      if (use(q.name, k) + amount > x->nominal + std::min(x->borrowing_limit.value_or(kNoLimit), pool(q, k))) return false;
      if (!q.cohort.empty() && cohort_used(q.cohort, k) + amount > cohort_nominal(q.cohort, k)) return false;
    }
    return true;
  }
  // What the cohort's queues use, and hold, of key k together.
  int64_t cohort_used(const std::string& cohort, const Key& k) const {
    int64_t u = 0;
    for (const auto& o : c.queues)
      if (o.cohort == cohort) u += use(o.name, k);
    return u;
  }
  int64_t cohort_nominal(const std::string& cohort, const Key& k) const {
    int64_t n = 0;
    for (const auto& o : c.queues)
      if (const Quota* y = quota_for(o, k); o.cohort == cohort && y != nullptr && y->resource == k.first && y->model == k.second)
        n += y->nominal;
    return n;
  }
  // "" when w fits q now, else why not.
  std::string why_not(const ClusterQueue& q, const Workload& w) const {
    if (fits(q, w)) return "";
    for (const auto& [raw, amount] : w.request) {
      const Quota* x = quota_for(q, raw);
      if (x == nullptr) return fmt::format("queue {} has no quota for {}{}", q.name, raw.first, raw.second.empty() ? "" : " (" + raw.second + ")");
      const Key k{x->resource, x->model};
      const int64_t borrow = std::min(x->borrowing_limit.value_or(kNoLimit), pool(q, k));
      if (use(q.name, k) + amount > x->nominal + borrow) {
        return fmt::format("queue {} uses {} of {} {} (nominal {}, {} to borrow) and {} asks {}", q.name, use(q.name, k),
                           k.first, k.second.empty() ? "" : "(" + k.second + ")", x->nominal, borrow, w.name, amount);
      }
      // What the cohort's queues use together never passes what they hold together.
      if (!q.cohort.empty() && cohort_used(q.cohort, k) + amount > cohort_nominal(q.cohort, k)) {
        return fmt::format("cohort {} uses {} of its {} {} and {} asks {}", q.cohort, cohort_used(q.cohort, k),
                           cohort_nominal(q.cohort, k), k.first, w.name, amount);
      }
    }
    return "";
  }
  bool within_nominal(const ClusterQueue& q, const Workload& w) const {
    for (const auto& [raw, amount] : w.request) {
      const Quota* x = quota_for(q, raw);
      if (x == nullptr || use(q.name, {x->resource, x->model}) + amount > x->nominal) return false;
    }
    return true;
  }
  void add(const ClusterQueue& q, const Workload& w, int sign) {
    for (const auto& [raw, amount] : w.request) used[q.name][quota_key(q, raw)] += sign * amount;
  }
  double share(const ClusterQueue& q) const {
    double s = 0;
    for (const auto& x : q.quotas) {
      const int64_t u = use(q.name, {x.resource, x.model});
      s = std::max(s, x.nominal > 0 ? static_cast<double>(u) / static_cast<double>(x.nominal)
                                    : (u > 0 ? std::numeric_limits<double>::infinity() : 0.0));
    }
    return s / q.weight;
  }
  bool borrowing(const ClusterQueue& q) const {
    for (const auto& x : q.quotas)
      if (use(q.name, {x.resource, x.model}) > x.nominal) return true;
    return false;
  }
};

namespace {

bool before(const Workload* a, const Workload* b) {
  if (a->priority != b->priority) return a->priority > b->priority;
  if (a->created != b->created) return a->created < b->created;
  return a->id < b->id;
}

using nlohmann::json;
using k8s::api::text;

// The pod's requests of the resources `config` has quotas for, by (resource, model): what the
// scheduler counts (k8s::pod_request: containers, init containers and sidecars, overhead).
Amounts requests_of(const Config& config, const json& pod) {
  std::set<std::string> resources;
  for (const auto& q : config.queues)
    for (const auto& x : q.quotas) resources.insert(x.resource);
  Amounts out;
  auto decoded = k8s::api::decode_pod(pod);
  if (!decoded) return out;
  const std::string model = text(pod, {"spec", "nodeSelector", "nvidia.com/gpu.product"});
  for (const auto& r : resources) {
    const k8s::Quantity q = k8s::pod_request(decoded->view.spec, r);
    if (!q.is_zero() && !q.is_negative()) out[{r, model}] = q.value();
  }
  return out;
}

int32_t priority_of(const json& pod) {
  const json* p = k8s::api::find(pod, {"spec", "priority"});
  return p != nullptr && p->is_number_integer() ? static_cast<int32_t>(std::clamp<int64_t>(p->get<int64_t>(), INT32_MIN, INT32_MAX)) : 0;
}

}  // namespace

const ClusterQueue* Config::find(const std::string& name) const {
  for (const auto& q : queues)
    if (q.name == name) return &q;
  return nullptr;
}

Result<Config> parse_config(std::string_view text, const std::string& source) {
  auto root = load_yaml(text, source, YamlLimits{});
  if (!root) return std::unexpected(root.error());
  const Reader r{source};
  Config c;
  const YAML::Node& doc = *root;
  if (!doc.IsMap()) return fail(ErrorCode::kInvalidArgument, "{}: want a mapping with version and clusterQueues", source);
  auto version = r.text(doc["version"], "version", true);
  if (!version) return std::unexpected(version.error());
  if (*version != "v1") return r.bad(doc["version"], "version", "{:?}: this reads v1", *version);
  const YAML::Node qs = doc["clusterQueues"];
  if (!qs || !qs.IsSequence()) return fail(ErrorCode::kInvalidArgument, "{}: clusterQueues: want a list", source);
  if (qs.size() > kMaxQueues) return r.bad(qs, "clusterQueues", "{} queues, at most {}", qs.size(), kMaxQueues);
  std::set<std::string> names;
  for (size_t i = 0; i < qs.size(); ++i) {
    const YAML::Node& n = qs[i];
    const std::string f = fmt::format("clusterQueues[{}]", i);
    if (!n.IsMap()) return r.bad(n, f, "want a mapping");
    ClusterQueue q;
    q.line = n.Mark().line + 1;
    auto name = r.text(n["name"], f + ".name", true);
    if (!name) return std::unexpected(name.error());
    if (!dns_label(*name)) return r.bad(n["name"], f + ".name", "{:?} is not a DNS label", name->substr(0, 80));
    if (!names.insert(*name).second) return r.bad(n["name"], f + ".name", "queue {} is named twice", *name);
    q.name = *name;
    auto cohort = r.text(n["cohort"], f + ".cohort", false);
    if (!cohort) return std::unexpected(cohort.error());
    if (!cohort->empty() && !dns_label(*cohort))
      return r.bad(n["cohort"], f + ".cohort", "{:?} is not a DNS label", cohort->substr(0, 80));
    q.cohort = *cohort;
    if (const YAML::Node ns = n["namespaces"]) {
      if (!ns.IsSequence()) return r.bad(ns, f + ".namespaces", "want a list");
      if (ns.size() > kMaxNamespaces)
        return r.bad(ns, f + ".namespaces", "{} namespaces, at most {}", ns.size(), kMaxNamespaces);
      for (size_t k = 0; k < ns.size(); ++k) {
        auto v = r.text(ns[k], fmt::format("{}.namespaces[{}]", f, k), true);
        if (!v) return std::unexpected(v.error());
        q.namespaces.push_back(*v);
      }
    }
    if (const YAML::Node w = n["weight"]) {
      double v = 0;
      try {
        v = w.as<double>();
      } catch (const YAML::Exception&) {
        v = -1;
      }
      if (!(v > 0) || !std::isfinite(v) || v > 1e6) return r.bad(w, f + ".weight", "want a number above 0");
      q.weight = v;
    }
    auto reclaim = r.text(n["reclaimWithinCohort"], f + ".reclaimWithinCohort", false);
    if (!reclaim) return std::unexpected(reclaim.error());
    if (reclaim->empty() || *reclaim == "Any") {
      q.reclaim = Reclaim::kAny;
    } else if (*reclaim == "LowerPriority") {
      q.reclaim = Reclaim::kLowerPriority;
    } else if (*reclaim == "Never") {
      q.reclaim = Reclaim::kNever;
    } else {
      return r.bad(n["reclaimWithinCohort"], f + ".reclaimWithinCohort", "{:?}: want Any, LowerPriority or Never",
                   reclaim->substr(0, 40));
    }
    const YAML::Node quotas = n["quotas"];
    if (!quotas || !quotas.IsSequence() || quotas.size() == 0) return r.bad(n, f + ".quotas", "want a non-empty list");
    if (quotas.size() > kMaxQuotas) return r.bad(quotas, f + ".quotas", "{} quotas, at most {}", quotas.size(), kMaxQuotas);
    for (size_t k = 0; k < quotas.size(); ++k) {
      const YAML::Node& e = quotas[k];
      const std::string g = fmt::format("{}.quotas[{}]", f, k);
      if (!e.IsMap()) return r.bad(e, g, "want a mapping");
      Quota x;
      auto res = r.text(e["resource"], g + ".resource", true);
      if (!res) return std::unexpected(res.error());
      auto model = r.text(e["model"], g + ".model", false);
      if (!model) return std::unexpected(model.error());
      x.resource = *res;
      x.model = *model;
      if (!e["nominalQuota"]) return r.bad(e, g + ".nominalQuota", "required");
      auto nominal = r.count(e["nominalQuota"], g + ".nominalQuota");
      if (!nominal) return std::unexpected(nominal.error());
      x.nominal = *nominal;
      for (const auto& [key, into] : {std::pair{"borrowingLimit", &x.borrowing_limit}, {"lendingLimit", &x.lending_limit}}) {
        if (!e[key]) continue;
        auto v = r.count(e[key], g + "." + key);
        if (!v) return std::unexpected(v.error());
        *into = *v;
      }
      if (x.lending_limit && *x.lending_limit > x.nominal)
        return r.bad(e["lendingLimit"], g + ".lendingLimit", "{} is more than the nominal quota {}", *x.lending_limit, x.nominal);
      for (const auto& y : q.quotas)
        if (y.resource == x.resource && y.model == x.model)
          return r.bad(e, g, "{} {} has a quota twice in queue {}", x.resource, x.model, q.name);
      q.quotas.push_back(std::move(x));
    }
    c.queues.push_back(std::move(q));
  }
  for (const auto& q : c.queues)
    if (!q.cohort.empty() && names.contains(q.cohort))
      return fail(ErrorCode::kInvalidArgument, "{}:{}: clusterQueues: cohort {} of queue {} is also a queue's name (a cycle)",
                  source, q.line, q.cohort, q.name);
  if (const YAML::Node lqs = doc["localQueues"]) {
    if (!lqs.IsSequence()) return r.bad(lqs, "localQueues", "want a list");
    if (lqs.size() > kMaxQueues * 10) return r.bad(lqs, "localQueues", "{} local queues, at most {}", lqs.size(), kMaxQueues * 10);
    for (size_t i = 0; i < lqs.size(); ++i) {
      const YAML::Node& n = lqs[i];
      const std::string f = fmt::format("localQueues[{}]", i);
      if (!n.IsMap()) return r.bad(n, f, "want a mapping");
      LocalQueue l;
      auto ns = r.text(n["namespace"], f + ".namespace", true);
      auto name = r.text(n["name"], f + ".name", true);
      auto cq = r.text(n["clusterQueue"], f + ".clusterQueue", true);
      for (const auto* x : {&ns, &name, &cq})
        if (!*x) return std::unexpected(x->error());
      if (!names.contains(*cq)) return r.bad(n["clusterQueue"], f + ".clusterQueue", "no cluster queue {:?}", cq->substr(0, 80));
      l.ns = *ns;
      l.name = *name;
      l.cluster_queue = *cq;
      c.local_queues.push_back(std::move(l));
    }
  }
  return c;
}

std::string queue_for(const Config& c, const std::string& ns, const std::string& local_queue) {
  if (!local_queue.empty()) {
    for (const auto& l : c.local_queues)
      if (l.ns == ns && l.name == local_queue) return l.cluster_queue;
  }
  for (const auto& q : c.queues)
    if (std::ranges::find(q.namespaces, ns) != q.namespaces.end()) return q.name;
  return "";
}

std::map<std::string, QueueUsage> usage(const Config& c, const std::vector<Workload>& workloads) {
  std::map<std::string, QueueUsage> out;
  for (const auto& q : c.queues) out[q.name];
  for (const auto& w : workloads) {
    const ClusterQueue* q = c.find(w.queue);
    if (q == nullptr) continue;
    auto& u = out[q->name];
    for (const auto& [raw, amount] : w.request) (w.admitted ? u.used : u.pending)[quota_key(*q, raw)] += amount;
    ++(w.admitted ? u.admitted : u.waiting);
  }
  for (const auto& q : c.queues) {
    auto& u = out[q.name];
    for (const auto& x : q.quotas) {
      const Key k{x.resource, x.model};
      const auto it = u.used.find(k);
      if (it != u.used.end() && it->second > x.nominal) u.borrowed[k] = it->second - x.nominal;
    }
  }
  return out;
}

bool Admission::Before::operator()(const Workload* a, const Workload* b) const { return before(a, b); }

Admission::Admission(const Config& c) : c_(c), pending_(c.queues.size()) {}

Admission::~Admission() = default;

std::optional<size_t> Admission::index_of(const std::string& queue) const {
  const ClusterQueue* q = c_.find(queue);
  if (q == nullptr) return std::nullopt;
  return static_cast<size_t>(q - c_.queues.data());
}

void Admission::add(Workload w) {
  remove(w.id);
  auto owned = std::make_unique<Workload>(std::move(w));
  const Workload* p = owned.get();
  if (const auto i = index_of(p->queue)) {
    if (p->admitted) {
      used_ = nullptr;
      admitted_.insert(p);
    } else {
      pending_[*i].insert(p);
    }
  } else if (!p->admitted) {
    unknown_.insert(p);
  }
  all_.emplace(p->id, std::move(owned));
}

void Admission::remove(const std::string& id) {
  const auto it = all_.find(id);
  if (it == all_.end()) return;
  const Workload* p = it->second.get();
  if (const auto i = index_of(p->queue)) {
    if (p->admitted) {
      used_ = nullptr;
      admitted_.erase(p);
    } else {
      pending_[*i].erase(p);
    }
  }
  unknown_.erase(p);
  all_.erase(it);
}

bool Admission::set_admitted(const std::string& id) {
  const auto it = all_.find(id);
  if (it == all_.end() || it->second->admitted) return false;
  Workload w = *it->second;
  w.admitted = true;
  add(std::move(w));
  return true;
}

Decision Admission::pass(bool reasons) const {
  Decision d;
  if (used_ == nullptr) {
    auto st = std::make_shared<State>(State{c_, {}});
    for (const Workload* w : admitted_) st->add(c_.queues[*index_of(w->queue)], *w, +1);
    used_ = std::move(st);
  }
  State st = *used_;
  if (reasons)
    for (const Workload* w : unknown_) d.waiting[w->id] = fmt::format("{}: no cluster queue {:?}", w->name, w->queue);
  const size_t n = c_.queues.size();
  std::vector<std::set<const Workload*, Before>::const_iterator> next(n);
  for (size_t i = 0; i < n; ++i) next[i] = pending_[i].begin();
  std::vector<double> share(n);
  for (size_t i = 0; i < n; ++i) share[i] = st.share(c_.queues[i]);
  // Without reasons: per queue, requests that failed without a reclaim in this pass. A later
  // workload of the queue asking at least as much of each and of no higher priority fails too
  // (usage only grows until a reclaim, which forgets them).
  std::vector<std::vector<const Workload*>> failed(n);
  auto dominated = [&](size_t i, const Workload& w) {
    for (const Workload* f : failed[i]) {
      if (w.priority > f->priority) continue;
      bool all = true;
      for (const auto& [k, v] : f->request)
        if (amount_of(w.request, k) < v) all = false;
      if (all) return true;
    }
    return false;
  };
  std::set<std::string> victims_taken;
  for (;;) {
    // The head of the queue with the lowest weighted dominant share.
    size_t pick_i = n;
    for (size_t i = 0; i < n; ++i) {
      if (next[i] == pending_[i].end()) continue;
      if (pick_i == n || share[i] < share[pick_i] || (share[i] == share[pick_i] && before(*next[i], *next[pick_i]))) pick_i = i;
    }
    if (pick_i == n) break;
    const ClusterQueue& pick = c_.queues[pick_i];
    const Workload& w = **next[pick_i]++;
    if (!reasons && dominated(pick_i, w)) continue;
    if (st.fits(pick, w)) {
      st.add(pick, w, +1);
      share[pick_i] = st.share(pick);
      d.admit.push_back(w.id);
      continue;
    }
    if (pick.reclaim != Reclaim::kNever && !pick.cohort.empty() && st.within_nominal(pick, w)) {
      // Victims: admitted workloads of borrowing queues of the cohort, lowest priority, newest first.
      std::vector<const Workload*> candidates;
      for (const Workload* v : admitted_) {
        if (victims_taken.contains(v->id) || v->queue == pick.name) continue;
        const ClusterQueue* vq = c_.find(v->queue);
        if (vq == nullptr || vq->cohort != pick.cohort || !st.borrowing(*vq)) continue;
        if (pick.reclaim == Reclaim::kLowerPriority && v->priority >= w.priority) continue;
        candidates.push_back(v);
      }
      std::ranges::sort(candidates, [](const Workload* a, const Workload* b) {
        if (a->priority != b->priority) return a->priority < b->priority;
        if (a->created != b->created) return a->created > b->created;
        return a->id > b->id;
      });
      std::vector<const Workload*> chosen;
      State trial = st;
      for (const Workload* v : candidates) {
        if (trial.fits(pick, w)) break;
        const ClusterQueue* vq = c_.find(v->queue);
        if (!trial.borrowing(*vq)) continue;  // it has given back what it borrowed
        trial.add(*vq, *v, -1);
        chosen.push_back(v);
      }
      if (!chosen.empty() && trial.fits(pick, w)) {
        st.used = std::move(trial.used);
        st.add(pick, w, +1);  // held for it while the victims leave
        for (size_t i = 0; i < n; ++i) share[i] = st.share(c_.queues[i]);
        for (const Workload* v : chosen) {
          victims_taken.insert(v->id);
          d.evict[w.id].push_back(v->id);
        }
        for (auto& f : failed) f.clear();
        if (reasons)
          d.waiting[w.id] = fmt::format("{}: reclaiming {} workload(s) that borrow in cohort {}", w.name, chosen.size(), pick.cohort);
        continue;
      }
    }
    if (reasons) {
      d.waiting[w.id] = st.why_not(pick, w);
    } else if (failed[pick_i].size() < 4) {
      failed[pick_i].push_back(&w);
    } else {
      failed[pick_i][failed[pick_i].size() - 1] = &w;
    }
  }
  return d;
}

Decision admit(const Config& c, const std::vector<Workload>& workloads) {
  Admission a(c);
  for (const auto& w : workloads) a.add(w);
  return a.pass();
}

namespace {

PodFacts facts_of(const Config& config, const json& pod) {
  PodFacts f;
  f.resource_version = text(pod, {"metadata", "resourceVersion"});
  f.ns = text(pod, {"metadata", "namespace"});
  f.name = text(pod, {"metadata", "name"});
  f.uid = text(pod, {"metadata", "uid"});
  f.created = text(pod, {"metadata", "creationTimestamp"});
  f.queue = queue_for(config, f.ns, text(pod, {"metadata", "labels", kQueueLabel}));
  f.finished = pod_finished(pod);
  if (auto gang = gang_of(pod); gang && *gang) f.gang_key = (*gang)->key;
  f.priority = priority_of(pod);
  f.request = requests_of(config, pod);
  f.queue_gated = has_gang_gate(pod, kQueueGate);
  return f;
}

}  // namespace

const PodFacts& PodFactsCache::get(const Config& c, const json& pod) {
  const std::string uid = text(pod, {"metadata", "uid"});
  const std::string rv = text(pod, {"metadata", "resourceVersion"});
  auto it = facts_.find(uid);
  if (it == facts_.end() || rv.empty() || it->second.resource_version != rv) {
    it = facts_.insert_or_assign(uid, facts_of(c, pod)).first;
  }
  return it->second;
}

void PodFactsCache::keep_only(const std::set<std::string>& uids) {
  std::erase_if(facts_, [&](const auto& kv) { return !uids.contains(kv.first); });
}

std::vector<Workload> workloads_of(const Config& config, const std::vector<const json*>& pods,
                                   std::map<std::string, std::vector<const json*>>* members, PodFactsCache* cache) {
  std::map<std::string, Workload> by_id;
  std::map<std::string, std::vector<const json*>> of;
  PodFacts scratch;
  for (const json* p : pods) {
    const PodFacts& f = cache != nullptr ? cache->get(config, *p) : (scratch = facts_of(config, *p));
    if (f.finished) continue;
    const std::string& queue = f.queue;
    if (queue.empty()) continue;
    const bool in_gang = !f.gang_key.empty();
    const std::string id = in_gang ? "gang:" + f.gang_key : f.uid;
    auto& w = by_id[id];
    if (w.id.empty()) {
      w.id = id;
      w.name = in_gang ? "gang " + f.gang_key : f.ns + "/" + f.name;
      w.queue = queue;
      w.created = f.created;
      w.priority = f.priority;
      w.admitted = true;
    }
    w.priority = std::max(w.priority, f.priority);
    w.created = std::min(w.created, f.created);
    for (const auto& [k, v] : f.request) w.request[k] += v;
    if (f.queue_gated) w.admitted = false;
    if (members != nullptr) of[id].push_back(p);
  }
  std::vector<Workload> out;
  out.reserve(by_id.size());
  for (auto& [id, w] : by_id) out.push_back(std::move(w));
  if (members != nullptr) *members = std::move(of);
  return out;
}

}  // namespace kgpu::scheduler::queues
