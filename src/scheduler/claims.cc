#include "scheduler/claims.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <unordered_map>

#include "common/log.h"
#include "common/timestamp.h"
#include "k8s/api/document.h"
#include "k8s/api/json.h"
#include "k8s/objects.h"
#include "k8s/predicates.h"
#include "k8s/quantity.h"
#include "apiclient/client.h"
#include "framework/cluster.h"

namespace kgpu::scheduler {

using nlohmann::json;

namespace {

using k8s::api::at;
using k8s::api::text;

using k8s::api::list;

std::string key_of(const std::string& ns, const std::string& name) { return ns.empty() ? name : ns + "/" + name; }

using sched::Taint;
using sched::Toleration;

using Counters = std::vector<std::pair<std::string, k8s::Quantity>>;

struct Dev {
  std::string name;
  cel::DeviceInput input;
  std::vector<Taint> taints;
  std::vector<std::pair<std::string, Counters>> consumes;  // counter set -> counters (KEP-4815)
};

struct Slice {
  std::string name, driver, pool, node;
  int64_t generation = 0;
  std::vector<Dev> devices;
  std::map<std::string, Counters> counter_sets;  // spec.sharedCounters
};

// A counter of a pool: (driver, pool, counter set, counter).
using CounterKey = std::tuple<std::string, std::string, std::string, std::string>;
using CounterUse = std::map<CounterKey, k8s::Quantity>;

Counters counters_of(const k8s::QuantityMap& m) {
  Counters out;
  for (const auto& [name, q] : m) out.emplace_back(std::string(name), q.value);
  return out;
}

struct DeviceClassRec {
  std::vector<std::string> selectors;
  json config = json::array();  // spec.config[]
};

struct SubRequest {
  std::string name;  // the result's request name: "req" or "req/sub"
  std::string device_class;
  std::vector<std::string> selectors;
  bool all = false;
  int64_t count = 1;
  std::vector<Toleration> tolerations;
};

struct Request {
  std::string name;
  std::vector<SubRequest> alternatives;  // one for `exactly`, in order for firstAvailable
};

struct ClaimRec {
  std::string ns, name, uid, owner_uid;
  bool deleting = false;
  std::vector<Request> requests;
  json config = json::array();  // spec.devices.config[]
  std::string unsupported;      // why kgpu cannot allocate it ("" none)
  bool allocated = false;
  std::vector<DeviceId> devices;  // allocated
  std::vector<std::pair<std::string, DeviceId>> results;
  std::optional<std::set<std::string>> pinned;  // nodes the allocation allows; nullopt: any
  bool unreadable_selector = false;
  std::vector<std::string> reserved;  // uids
};

std::vector<Toleration> tolerations_of(const json& list) {
  std::vector<Toleration> out;
  if (!list.is_array()) return out;
  for (const auto& t : list) out.push_back({text(t, {"key"}), text(t, {"operator"}), text(t, {"value"}), text(t, {"effect"})});
  return out;
}

SubRequest sub_request(const json& j, const std::string& name, std::string* unsupported) {
  SubRequest s;
  s.name = name;
  s.device_class = text(j, {"deviceClassName"});
  for (const auto& sel : list(j, {"selectors"})) {
    const std::string e = text(at(sel, {"cel"}), {"expression"});
    if (!e.empty()) s.selectors.push_back(e);
  }
  s.all = text(j, {"allocationMode"}) == "All";
  if (const auto& c = at(j, {"count"}); c.is_number_integer()) s.count = c.get<int64_t>();
  s.tolerations = tolerations_of(at(j, {"tolerations"}));
  if (at(j, {"adminAccess"}).is_boolean() && at(j, {"adminAccess"}).get<bool>())
    *unsupported = fmt::format("request {} asks for adminAccess, which kgpu does not allocate", name);
  if (!at(j, {"capacity"}).is_null())
    *unsupported =
        fmt::format("request {} asks for device capacity (consumable capacity), which kgpu does not allocate", name);
  if (s.count < 1 && !s.all) *unsupported = fmt::format("request {}: count {} is not positive", name, s.count);
  return s;
}

ClaimRec claim_rec(const json& c) {
  ClaimRec r;
  r.ns = text(at(c, {"metadata"}), {"namespace"});
  r.name = text(at(c, {"metadata"}), {"name"});
  r.uid = text(at(c, {"metadata"}), {"uid"});
  r.deleting = !at(c, {"metadata", "deletionTimestamp"}).is_null();
  for (const auto& o : list(c, {"metadata", "ownerReferences"}))
    if (at(o, {"controller"}).is_boolean() && at(o, {"controller"}).get<bool>()) r.owner_uid = text(o, {"uid"});
  for (const auto& q : list(c, {"spec", "devices", "requests"})) {
    Request req;
    req.name = text(q, {"name"});
    if (const auto& ex = at(q, {"exactly"}); ex.is_object()) {
      req.alternatives.push_back(sub_request(ex, req.name, &r.unsupported));
    } else if (const auto& fa = at(q, {"firstAvailable"}); fa.is_array() && !fa.empty()) {
      for (const auto& alt : fa)
        req.alternatives.push_back(sub_request(alt, req.name + "/" + text(alt, {"name"}), &r.unsupported));
    } else if (!text(q, {"deviceClassName"}).empty()) {  // v1beta1's request-level fields
      req.alternatives.push_back(sub_request(q, req.name, &r.unsupported));
    } else {
      r.unsupported = fmt::format("request {} has neither exactly nor firstAvailable", req.name);
    }
    r.requests.push_back(std::move(req));
  }
  if (!list(c, {"spec", "devices", "constraints"}).empty())
    r.unsupported = "constraints (matchAttribute) are not supported by kgpu's allocator";
  if (const auto& cfg = at(c, {"spec", "devices", "config"}); cfg.is_array()) r.config = cfg;
  const json& alloc = at(c, {"status", "allocation"});
  if (alloc.is_object()) {
    r.allocated = true;
    for (const auto& x : list(alloc, {"devices", "results"})) {
      DeviceId id{text(x, {"driver"}), text(x, {"pool"}), text(x, {"device"})};
      r.devices.push_back(id);
      r.results.emplace_back(text(x, {"request"}), id);
    }
    const json& sel = at(alloc, {"nodeSelector"});
    if (sel.is_object()) {
      std::set<std::string> nodes;
      for (const auto& term : list(sel, {"nodeSelectorTerms"})) {
        bool read = false;
        for (const auto& f : list(term, {"matchFields"})) {
          if (text(f, {"key"}) == "metadata.name" && text(f, {"operator"}) == "In") {
            for (const auto& v : list(f, {"values"}))
              if (v.is_string()) nodes.insert(v.get<std::string>());
            read = true;
          }
        }
        if (!read || !list(term, {"matchExpressions"}).empty()) r.unreadable_selector = true;
      }
      r.pinned = std::move(nodes);
    }
  }
  for (const auto& x : list(c, {"status", "reservedFor"})) r.reserved.push_back(text(x, {"uid"}));
  return r;
}

Slice slice_rec(const json& s) {
  Slice out;
  out.name = text(s, {"metadata", "name"});
  auto doc = k8s::api::document_from_json(s, "ResourceSlice " + out.name, "ResourceSlice", "resource.k8s.io/v1");
  if (!doc) return out;
  const auto v = k8s::as_resource_slice(*doc);
  if (!v) return out;
  out.driver = std::string(v->driver.value);
  out.node = std::string(v->node_name.value);
  out.pool = std::string(v->pool_name.value);
  out.generation = v->pool_generation.value_or(0);
  for (const k8s::Device& d : v->devices) {
    Dev dev;
    dev.name = std::string(d.name);
    dev.input = cel::device_input(d, out.driver);
    for (const k8s::Taint& t : d.taints)
      dev.taints.push_back({std::string(t.key), std::string(t.value), std::string(t.effect)});
    for (const k8s::CounterSet& c : d.consumes_counters) dev.consumes.emplace_back(std::string(c.name), counters_of(c.counters));
    out.devices.push_back(std::move(dev));
  }
  for (const k8s::CounterSet& c : v->shared_counters) out.counter_sets[std::string(c.name)] = counters_of(c.counters);
  return out;
}

bool untolerated(const Taint& t, const std::vector<Toleration>& tols) {
  if (!k8s::taint_filters(t.effect)) return false;
  for (const auto& x : tols)
    if (k8s::toleration_tolerates(x.key, x.op, x.value, x.effect, t.key, t.value, t.effect)) return false;
  return true;
}

// One device of a node as the allocator walks them.
struct NodeDevice {
  DeviceId id;
  const Dev* dev = nullptr;
};

struct Failure {
  std::string why;
  bool resolvable = false;  // another claim's devices may free up (preemption could help)
  bool abort = false;       // a CEL evaluation error: the node's allocation stops
};

}  // namespace

struct ClaimAllocator::State {
  Clock& clock;
  std::chrono::milliseconds ttl;
  mutable std::mutex mu;
  std::map<std::string, Slice> slices;  // by slice name
  std::map<std::string, DeviceClassRec> classes;
  std::map<std::string, ClaimRec> claims;  // by ns/name
  struct Held {
    PodClaimChoice choice;
    bool bound = false;  // reserve() wrote the claims: kept until the informer shows them
  };
  std::map<std::string, Held> held;  // by pod uid
  struct Written {
    std::string ns, name, uid;
    bool allocated = false;  // reserve() wrote the allocation (not only reservedFor)
    std::string pod_name;
  };
  std::map<std::string, std::vector<Written>> written;  // by pod uid
  // Compiled selectors by expression (programs are immutable); cleared when it grows past the bound.
  std::unordered_map<std::string, std::shared_ptr<const Result<cel::Program>>> programs;
  static constexpr size_t kMaxPrograms = 4096;

  State(Clock& c, std::chrono::milliseconds t) : clock(c), ttl(t) {}

  std::shared_ptr<const Result<cel::Program>> program(const std::string& expr) {
    if (const auto it = programs.find(expr); it != programs.end()) return it->second;
    if (programs.size() >= kMaxPrograms) programs.clear();
    auto p = std::make_shared<const Result<cel::Program>>(cel::compile(expr));
    programs.emplace(expr, p);
    return p;
  }

  // Unbound choices go after the TTL; bound ones normally when the informer shows them (settle),
  // at the latest after kBoundTtlFactor TTLs (a claim changed by someone else meanwhile).
  static constexpr int kBoundTtlFactor = 10;
  void expire() {
    const auto now = clock.steady_now();
    std::erase_if(held, [&](const auto& kv) {
      return now - kv.second.choice.at > (kv.second.bound ? ttl * kBoundTtlFactor : ttl);
    });
  }

  // Bound choices whose claims the informer now shows reserved for the pod (or gone) are done.
  void settle() {
    std::erase_if(held, [&](const auto& kv) {
      if (!kv.second.bound) return false;
      for (const auto& cc : kv.second.choice.claims) {
        const auto it = claims.find(key_of(cc.ns, cc.name));
        if (it == claims.end() || it->second.uid != cc.uid) continue;
        if (!it->second.allocated || std::ranges::find(it->second.reserved, kv.first) == it->second.reserved.end())
          return false;
      }
      return true;
    });
  }

  // The node's current slices: node-local pools, the highest generation of each, in (driver, pool)
  // order (slices of one pool in their order).
  std::vector<const Slice*> current_slices(const std::string& node) const {
    std::map<std::pair<std::string, std::string>, int64_t> newest;
    for (const auto& [n, s] : slices) {
      if (s.node != node) continue;
      auto& g = newest[{s.driver, s.pool}];
      g = std::max(g, s.generation);
    }
    std::vector<std::pair<std::pair<std::string, std::string>, const Slice*>> chosen;
    for (const auto& [n, s] : slices)
      if (s.node == node && newest[{s.driver, s.pool}] == s.generation) chosen.push_back({{s.driver, s.pool}, &s});
    std::stable_sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<const Slice*> out;
    for (const auto& [k, s] : chosen) out.push_back(s);
    return out;
  }

  // The node's devices, in (driver, pool, slice, device) order.
  std::vector<NodeDevice> devices_on(const std::string& node) const {
    std::vector<NodeDevice> out;
    for (const Slice* s : current_slices(node))
      for (const auto& d : s->devices) out.push_back({{s->driver, s->pool, d.name}, &d});
    return out;
  }

  // The counters the node's pools share: their capacity.
  CounterUse counters_on(const std::string& node) const {
    CounterUse out;
    for (const Slice* s : current_slices(node))
      for (const auto& [set, counters] : s->counter_sets)
        for (const auto& [c, q] : counters) out[{s->driver, s->pool, set, c}] = q;
    return out;
  }

  // Whether the device's counter consumption fits what is left of `capacity` after `use`.
  static bool fits_counters(const NodeDevice& d, const CounterUse& capacity, const CounterUse& use) {
    for (const auto& [set, counters] : d.dev->consumes) {
      for (const auto& [c, q] : counters) {
        const CounterKey key{d.id.driver, d.id.pool, set, c};
        const auto cap = capacity.find(key);
        if (cap == capacity.end()) return false;  // a counter its pool does not publish
        const auto u = use.find(key);
        if ((u == use.end() ? q : u->second + q) > cap->second) return false;
      }
    }
    return true;
  }
  static void add_counters(const NodeDevice& d, CounterUse& use) {
    for (const auto& [set, counters] : d.dev->consumes)
      for (const auto& [c, q] : counters) {
        auto [it, fresh] = use.try_emplace(CounterKey{d.id.driver, d.id.pool, set, c}, q);
        if (!fresh) it->second += q;
      }
  }

  // Devices consuming shared counters (partitions) must fit what `counter_use` leaves of `capacity`.
  std::optional<Failure> allocate_request(const SubRequest& rq, const std::string& claim,
                                          const std::vector<NodeDevice>& devs, std::set<DeviceId>& used,
                                          std::vector<std::pair<std::string, DeviceId>>& results,
                                          const CounterUse& capacity, CounterUse& counter_use) {
    const auto cls = classes.find(rq.device_class);
    if (cls == classes.end())
      return Failure{
          fmt::format("ResourceClaim {} request {}: DeviceClass {} does not exist", claim, rq.name, rq.device_class)};
    struct Sel {
      std::shared_ptr<const Result<cel::Program>> p;
      bool of_class;
    };
    std::vector<Sel> sels;
    for (const auto& e : cls->second.selectors) sels.push_back({program(e), true});
    for (const auto& e : rq.selectors) sels.push_back({program(e), false});
    const auto whose = [&](const Sel& s) {
      return s.of_class ? fmt::format("DeviceClass {}", rq.device_class)
                        : fmt::format("ResourceClaim {} request {}", claim, rq.name);
    };
    for (const auto& s : sels)
      if (!*s.p)
        return Failure{fmt::format("the CEL selector of {} does not compile: {}", whose(s), s.p->error().message)};
    std::vector<DeviceId> free;
    CounterUse pending = counter_use;
    size_t of_class = 0, matching = 0, taken = 0, tainted = 0, exhausted = 0;
    std::string failing_selector;  // the request's first selector some device of the class failed
    for (const auto& d : devs) {
      bool ok = true, class_ok = true;
      for (const auto& s : sels) {
        if (!s.of_class && class_ok) {
          class_ok = false;
          ++of_class;
        }
        auto m = (*s.p)->matches(d.dev->input);
        if (!m)
          return Failure{
              fmt::format("the CEL selector of {} fails on device {}: {}", whose(s), d.id.text(), m.error().message),
              false, true};
        if (!*m) {
          if (!s.of_class && failing_selector.empty()) failing_selector = (*s.p)->source();
          ok = false;
          break;
        }
      }
      if (class_ok && ok) ++of_class;  // the request has no selectors of its own
      if (!ok) continue;
      ++matching;
      if (std::ranges::any_of(d.dev->taints, [&](const Taint& t) { return untolerated(t, rq.tolerations); })) {
        ++tainted;
        continue;
      }
      if (used.contains(d.id)) {
        ++taken;
        continue;
      }
      const bool wanted = rq.all || static_cast<int64_t>(free.size()) < rq.count;
      if (!d.dev->consumes.empty()) {
        if (!fits_counters(d, capacity, pending)) {
          ++exhausted;
          continue;
        }
        if (wanted) add_counters(d, pending);
      }
      free.push_back(d.id);
    }
    const auto counts = [&] {
      std::string s =
          fmt::format("{} device(s) of class {} here, {} match the selectors", of_class, rq.device_class, matching);
      if (taken > 0) s += fmt::format(", {} of them already allocated", taken);
      if (exhausted > 0)
        s += fmt::format(", {} overlap allocated devices (their shared counters are used up)", exhausted);
      if (tainted > 0) s += fmt::format(", {} tainted (not tolerated)", tainted);
      if (!failing_selector.empty() && matching < of_class) s += fmt::format("; selector: {}", failing_selector);
      return s;
    };
    if (rq.all) {
      if (free.empty() || taken > 0 || exhausted > 0)
        return Failure{fmt::format("ResourceClaim {} request {} (allocationMode All) cannot take every matching "
                                   "device: {}",
                                   claim, rq.name, counts()),
                       taken > 0 || exhausted > 0};
    } else if (static_cast<int64_t>(free.size()) < rq.count) {
      return Failure{fmt::format("ResourceClaim {} request {} wants {} device(s), {} free: {}", claim, rq.name,
                                 rq.count, free.size(), counts()),
                     taken > 0 || exhausted > 0};
    } else {
      free.resize(static_cast<size_t>(rq.count));
    }
    counter_use = std::move(pending);
    for (auto& id : free) {
      used.insert(id);
      results.emplace_back(rq.name, std::move(id));
    }
    return std::nullopt;
  }

  // The pod's claims on one node, or why not.
  std::optional<Failure> try_node(const std::string& node, const std::string& pod_uid,
                                  const std::vector<const ClaimRec*>& pod_claims,
                                  const std::map<std::string, std::pair<std::string, const ClaimChoice*>>& pending,
                                  std::set<DeviceId> used, std::vector<ClaimChoice>& out, size_t& free_after) {
    const std::vector<NodeDevice> devs = devices_on(node);
    const CounterUse capacity = counters_on(node);
    CounterUse counter_use;
    for (const auto& d : devs)
      if (used.contains(d.id)) add_counters(d, counter_use);
    for (const ClaimRec* c : pod_claims) {
      const std::string ckey = key_of(c->ns, c->name);
      ClaimChoice cc;
      cc.ns = c->ns;
      cc.name = c->name;
      cc.uid = c->uid;
      if (c->allocated) {
        if (c->unreadable_selector)
          return Failure{fmt::format("ResourceClaim {} is allocated with a nodeSelector kgpu cannot read", ckey)};
        if (c->pinned && !c->pinned->contains(node))
          return Failure{fmt::format("ResourceClaim {} is allocated on node {}", ckey,
                                     c->pinned->empty() ? std::string("(none)") : *c->pinned->begin())};
        if (c->reserved.size() >= kMaxReservedFor && std::ranges::find(c->reserved, pod_uid) == c->reserved.end())
          return Failure{fmt::format("ResourceClaim {} is reserved for {} pods already (the most allowed)", ckey,
                                     c->reserved.size()),
                         true};
        cc.preallocated = true;
        cc.results = c->results;
        out.push_back(std::move(cc));
        continue;
      }
      if (const auto p = pending.find(ckey); p != pending.end()) {
        if (p->second.first != node)
          return Failure{
              fmt::format("ResourceClaim {} is being allocated on node {} for another pod", ckey, p->second.first)};
        cc = *p->second.second;
        cc.preallocated = false;
        out.push_back(std::move(cc));
        continue;
      }
      if (!c->unsupported.empty()) return Failure{fmt::format("ResourceClaim {}: {}", ckey, c->unsupported)};
      if (devs.empty()) return Failure{"no ResourceSlice publishes devices on this node"};
      for (const auto& req : c->requests) {
        std::optional<Failure> first;
        bool done = false;
        for (const auto& alt : req.alternatives) {
          auto f = allocate_request(alt, ckey, devs, used, cc.results, capacity, counter_use);
          if (!f) {
            done = true;
            // The class's config for this request, then (below) the claim's.
            const auto cls = classes.find(alt.device_class);
            for (const auto& e : cls->second.config) {
              json entry = e;
              entry["source"] = "FromClass";
              entry["requests"] = json::array({alt.name});
              cc.config.push_back(std::move(entry));
            }
            break;
          }
          if (f->abort) return f;
          if (!first) first = std::move(f);
        }
        if (!done) {
          if (!first)
            return Failure{fmt::format("ResourceClaim {} request {} has nothing to allocate", ckey, req.name)};
          if (req.alternatives.size() > 1)
            first->why += fmt::format(" (none of the {} firstAvailable alternatives fits)", req.alternatives.size());
          return first;
        }
      }
      for (const auto& e : c->config) {
        json entry = e;
        entry["source"] = "FromClaim";
        cc.config.push_back(std::move(entry));
      }
      out.push_back(std::move(cc));
    }
    free_after = 0;
    for (const auto& d : devs)
      if (!used.contains(d.id) && d.dev->taints.empty() &&
          fits_counters(d, capacity, counter_use))
        ++free_after;
    return std::nullopt;
  }
};

ClaimAllocator::ClaimAllocator(Clock& clock, std::chrono::milliseconds ttl)
    : st_(std::make_unique<State>(clock, ttl)) {}
ClaimAllocator::~ClaimAllocator() = default;

void ClaimAllocator::upsert_slice(const json& slice) {
  Slice s = slice_rec(slice);
  if (s.name.empty()) return;
  std::lock_guard lock(st_->mu);
  st_->slices[s.name] = std::move(s);
}

void ClaimAllocator::remove_slice(const json& slice) {
  std::lock_guard lock(st_->mu);
  st_->slices.erase(text(at(slice, {"metadata"}), {"name"}));
}

void ClaimAllocator::upsert_class(const json& device_class) {
  DeviceClassRec c;
  const std::string name = text(at(device_class, {"metadata"}), {"name"});
  if (name.empty()) return;
  for (const auto& sel : list(device_class, {"spec", "selectors"})) {
    const std::string e = text(at(sel, {"cel"}), {"expression"});
    if (!e.empty()) c.selectors.push_back(e);
  }
  if (const auto& cfg = at(device_class, {"spec", "config"}); cfg.is_array()) c.config = cfg;
  std::lock_guard lock(st_->mu);
  st_->classes[name] = std::move(c);
}

void ClaimAllocator::remove_class(const json& device_class) {
  std::lock_guard lock(st_->mu);
  st_->classes.erase(text(at(device_class, {"metadata"}), {"name"}));
}

void ClaimAllocator::upsert_claim(const json& claim) {
  ClaimRec c = claim_rec(claim);
  if (c.name.empty()) return;
  std::lock_guard lock(st_->mu);
  st_->claims[key_of(c.ns, c.name)] = std::move(c);
  st_->settle();
}

void ClaimAllocator::remove_claim(const json& claim) {
  std::lock_guard lock(st_->mu);
  st_->claims.erase(key_of(text(at(claim, {"metadata"}), {"namespace"}), text(at(claim, {"metadata"}), {"name"})));
  st_->settle();
}

void ClaimAllocator::forget_pod(const std::string& pod_uid) {
  std::lock_guard lock(st_->mu);
  st_->held.erase(pod_uid);
  st_->written.erase(pod_uid);
}

bool ClaimAllocator::has_claims(const json& pod) { return !list(pod, {"spec", "resourceClaims"}).empty(); }

ClaimFilterResult ClaimAllocator::filter(const json& pod, std::span<const std::string_view> nodes) {
  ClaimFilterResult r;
  const std::string uid = text(at(pod, {"metadata"}), {"uid"});
  const std::string ns = text(at(pod, {"metadata"}), {"namespace"});
  const std::string pod_name = key_of(ns, text(at(pod, {"metadata"}), {"name"}));
  const auto all_nodes = [&](std::map<std::string, std::string>& into, const std::string& why) {
    for (const auto& n : nodes) into[std::string(n)] = why;
  };
  std::lock_guard lock(st_->mu);
  auto& s = *st_;
  s.expire();
  if (const auto h = s.held.find(uid); h != s.held.end() && !h->second.bound) s.held.erase(h);

  // The pod's claims.
  std::map<std::string, const json*> generated;
  for (const auto& x : list(pod, {"status", "resourceClaimStatuses"})) generated[text(x, {"name"})] = &x;
  std::vector<const ClaimRec*> pod_claims;
  std::string wait;
  for (const auto& rc : list(pod, {"spec", "resourceClaims"})) {
    const std::string entry = text(rc, {"name"});
    std::string claim = text(rc, {"resourceClaimName"});
    const std::string tmpl = text(rc, {"resourceClaimTemplateName"});
    bool from_template = false;
    if (claim.empty() && !tmpl.empty()) {
      const auto g = generated.find(entry);
      if (g == generated.end()) {
        wait = fmt::format(
            "waiting for the ResourceClaim of pod claim {} (template {}) to be created: "
            "pod.status.resourceClaimStatuses does not name it yet",
            entry, tmpl);
        break;
      }
      claim = text(*g->second, {"resourceClaimName"});
      if (claim.empty()) continue;  // the controller decided no claim is needed
      from_template = true;
    }
    if (claim.empty()) {
      wait = fmt::format("pod claim {} names neither resourceClaimName nor resourceClaimTemplateName", entry);
      break;
    }
    const auto it = s.claims.find(key_of(ns, claim));
    if (it == s.claims.end()) {
      wait = fmt::format("waiting for ResourceClaim {}: it does not exist (yet)", key_of(ns, claim));
      break;
    }
    if (from_template && it->second.owner_uid != uid) {
      wait = fmt::format("ResourceClaim {} was not created for this pod (its controller is not the pod)",
                         key_of(ns, claim));
      break;
    }
    if (it->second.deleting) {
      wait = fmt::format("ResourceClaim {} is being deleted", key_of(ns, claim));
      break;
    }
    if (std::ranges::find(pod_claims, &it->second) == pod_claims.end()) pod_claims.push_back(&it->second);
  }
  if (!wait.empty()) {
    all_nodes(r.unresolvable, wait);
    r.reason = "WaitingForResourceClaim";
    r.message = fmt::format("0/{} nodes are available: {}", nodes.size(), wait);
    return r;
  }

  // Devices taken by other claims, and the pod's claims another pending choice already allocates.
  std::set<std::string> own;
  for (const auto* c : pod_claims) own.insert(key_of(c->ns, c->name));
  std::set<DeviceId> used;
  for (const auto& [k, c] : s.claims)
    if (!own.contains(k)) used.insert(c.devices.begin(), c.devices.end());
  std::map<std::string, std::pair<std::string, const ClaimChoice*>> pending;
  for (const auto& [puid, h] : s.held) {
    if (puid == uid) continue;
    for (const auto& cc : h.choice.claims) {
      if (cc.preallocated) continue;
      const std::string k = key_of(cc.ns, cc.name);
      if (own.contains(k)) {
        pending.emplace(k, std::make_pair(h.choice.node, &cc));
      } else {
        for (const auto& [req, id] : cc.results) used.insert(id);
      }
    }
  }

  struct Best {
    std::string node;
    size_t free_after = 0;
    std::vector<ClaimChoice> claims;
  };
  std::optional<Best> best;
  std::map<std::string, size_t> reasons;
  for (const auto& nv : nodes) {
    const std::string node(nv);
    std::vector<ClaimChoice> out;
    size_t free_after = 0;
    if (auto f = s.try_node(node, uid, pod_claims, pending, used, out, free_after)) {
      (f->resolvable ? r.failed : r.unresolvable)[node] = f->why;
      ++reasons[f->why];
      continue;
    }
    if (!best || free_after < best->free_after || (free_after == best->free_after && node < best->node))
      best = Best{node, free_after, std::move(out)};
  }
  if (best) {
    std::vector<std::string> picked;
    for (const auto& cc : best->claims)
      for (const auto& [req, id] : cc.results) picked.push_back(fmt::format("{}:{}", cc.name, id.device));
    r.node = best->node;
    r.message = fmt::format("{} on {} (devices {})", pod_name, best->node, fmt::join(picked, ","));
    r.failed.clear();
    r.unresolvable.clear();
    State::Held h;
    h.choice.pod = pod_name;
    h.choice.node = best->node;
    h.choice.claims = std::move(best->claims);
    h.choice.at = s.clock.steady_now();
    s.held[uid.empty() ? pod_name : uid] = std::move(h);
    return r;
  }
  std::vector<std::pair<size_t, std::string>> sorted;
  for (const auto& [why, n] : reasons) sorted.emplace_back(n, why);
  std::ranges::sort(sorted, [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size() && i < 3; ++i)
    parts.push_back(fmt::format("{} {}", sorted[i].first, sorted[i].second));
  if (sorted.size() > 3) parts.push_back(fmt::format("{} other reason(s)", sorted.size() - 3));
  r.reason = "CannotAllocateClaims";
  r.message =
      fmt::format("0/{} nodes are available: cannot allocate all claims: {}", nodes.size(),
                  parts.empty() ? std::string("no candidate nodes") : fmt::format("{}", fmt::join(parts, "; ")));
  return r;
}

std::optional<PodClaimChoice> ClaimAllocator::choice(const std::string& pod_uid) const {
  std::lock_guard lock(st_->mu);
  const auto it = st_->held.find(pod_uid);
  if (it == st_->held.end()) return std::nullopt;
  return it->second.choice;
}

json allocation_json(const ClaimChoice& c, const std::string& node, const std::string& now) {
  json results = json::array();
  for (const auto& [req, id] : c.results)
    results.push_back({{"request", req}, {"driver", id.driver}, {"pool", id.pool}, {"device", id.device}});
  json devices = {{"results", results}};
  if (!c.config.empty()) devices["config"] = c.config;
  return {{"devices", devices},
          {"nodeSelector",
           {{"nodeSelectorTerms", json::array({{{"matchFields", json::array({{{"key", "metadata.name"},
                                                                              {"operator", "In"},
                                                                              {"values", json::array({node})}}})}}})}}},
          {"allocationTimestamp", now}};
}

namespace {

bool reserved_for(const json& claim, const std::string& uid) {
  for (const auto& x : list(claim, {"status", "reservedFor"}))
    if (text(x, {"uid"}) == uid) return true;
  return false;
}

bool has_finalizer(const json& claim) {
  for (const auto& f : list(claim, {"metadata", "finalizers"}))
    if (f.is_string() && f.get<std::string>() == kClaimFinalizer) return true;
  return false;
}

}  // namespace

std::string ClaimAllocator::reserve(kube::Client& client, const std::string& ns, const std::string& pod,
                                    const std::string& pod_uid, const std::string& node) {
  namespace res = kube::resources;
  const std::string key = pod_uid.empty() ? key_of(ns, pod) : pod_uid;
  PodClaimChoice ch;
  {
    std::lock_guard lock(st_->mu);
    st_->expire();
    const auto it = st_->held.find(key);
    if (it == st_->held.end() || it->second.choice.node != node)
      return fmt::format(
          "kgpu scheduler: no ResourceClaim allocation for pod {}/{} on node {} (filter was not called, chose "
          "another node, or the choice expired); retry",
          ns, pod, node);
    ch = it->second.choice;
  }
  {
    std::lock_guard lock(st_->mu);
    st_->written.erase(key);  // unreserve() undoes only what this call writes
  }
  std::vector<State::Written> written;
  std::string error;
  for (const auto& cc : ch.claims) {
    const std::string what = fmt::format("ResourceClaim {}/{}", cc.ns, cc.name);
    bool done = false;
    for (int attempt = 0; attempt < kClaimWriteAttempts && !done && error.empty(); ++attempt) {
      auto cur = client.get(res::kResourceClaims, cc.ns, cc.name);
      if (!cur) {
        error = fmt::format("reading {}: {}", what, cur.error().text());
        break;
      }
      if (text(at(*cur, {"metadata"}), {"uid"}) != cc.uid) {
        error = fmt::format("{} was deleted and created again since filter; retry", what);
        break;
      }
      if (!at(*cur, {"metadata", "deletionTimestamp"}).is_null()) {
        error = fmt::format("{} is being deleted", what);
        break;
      }
      const bool allocated = at(*cur, {"status", "allocation"}).is_object();
      if (allocated) {
        const ClaimRec now = claim_rec(*cur);
        if (now.unreadable_selector || (now.pinned && !now.pinned->contains(node))) {
          error = fmt::format("{} was allocated for another node since filter; retry", what);
          break;
        }
        if (reserved_for(*cur, pod_uid)) {
          done = true;
          break;
        }
        if (now.reserved.size() >= kMaxReservedFor) {
          error = fmt::format("{} is reserved for {} pods already (the most allowed)", what, now.reserved.size());
          break;
        }
      } else if (cc.preallocated) {
        error = fmt::format("{} was deallocated since filter; retry", what);
        break;
      }
      json next = std::move(*cur);
      if (!allocated && !has_finalizer(next)) {
        next["metadata"]["finalizers"].push_back(kClaimFinalizer);
        auto u = client.update(res::kResourceClaims, cc.ns, cc.name, next);
        if (!u) {
          if (u.error().conflict()) continue;
          error = fmt::format("adding the finalizer to {}: {}", what, u.error().text());
          break;
        }
        next = std::move(*u);
      }
      if (!allocated) next["status"]["allocation"] = allocation_json(cc, node, format_rfc3339(st_->clock.system_now()));
      next["status"]["reservedFor"].push_back({{"resource", "pods"}, {"name", pod}, {"uid", pod_uid}});
      auto u = client.update(res::kResourceClaims, cc.ns, cc.name, next, "status");
      if (!u) {
        if (u.error().conflict()) continue;
        error = fmt::format("writing the allocation of {}: {}", what, u.error().text());
        break;
      }
      written.push_back({cc.ns, cc.name, cc.uid, !allocated, pod});
      done = true;
    }
    if (!done && error.empty())
      error = fmt::format("{} kept changing ({} conflicts); retry", what, kClaimWriteAttempts);
    if (!error.empty()) break;
  }
  {
    std::lock_guard lock(st_->mu);
    st_->written[key] = written;
    if (error.empty()) {
      if (const auto it = st_->held.find(key); it != st_->held.end()) it->second.bound = true;
      st_->settle();
      return "";
    }
  }
  unreserve(client, key);
  return "kgpu scheduler: " + error;
}

void ClaimAllocator::unreserve(kube::Client& client, const std::string& pod_uid) {
  namespace res = kube::resources;
  std::vector<State::Written> written;
  {
    std::lock_guard lock(st_->mu);
    if (const auto it = st_->written.find(pod_uid); it != st_->written.end()) {
      written = std::move(it->second);
      st_->written.erase(it);
    }
    st_->held.erase(pod_uid);
  }
  for (const auto& w : written) {
    std::string error;
    bool done = false;
    for (int attempt = 0; attempt < kClaimWriteAttempts && !done && error.empty(); ++attempt) {
      auto cur = client.get(res::kResourceClaims, w.ns, w.name);
      if (!cur) {
        if (!cur.error().not_found()) error = cur.error().text();
        done = cur.error().not_found();
        break;
      }
      if (text(at(*cur, {"metadata"}), {"uid"}) != w.uid) {
        done = true;
        break;
      }
      json next = std::move(*cur);
      auto& reserved = next["status"]["reservedFor"];
      if (reserved.is_array())
        reserved.erase(
            std::remove_if(reserved.begin(), reserved.end(), [&](const json& x) { return text(x, {"uid"}) == pod_uid; }),
            reserved.end());
      const bool deallocate = w.allocated && (!reserved.is_array() || reserved.empty());
      if (deallocate) {
        next["status"].erase("allocation");
        next["status"].erase("reservedFor");
      }
      auto u = client.update(res::kResourceClaims, w.ns, w.name, next, "status");
      if (!u) {
        if (u.error().conflict()) continue;
        error = u.error().text();
        break;
      }
      if (deallocate) {
        json main = std::move(*u);
        auto& fins = main["metadata"]["finalizers"];
        if (fins.is_array()) {
          fins.erase(std::remove(fins.begin(), fins.end(), json(kClaimFinalizer)), fins.end());
          if (auto m = client.update(res::kResourceClaims, w.ns, w.name, main); !m)
            error = "removing the finalizer: " + m.error().text();
        }
      }
      done = true;
    }
    if (!error.empty() || !done)
      log::warn("cannot undo a ResourceClaim reservation",
                {log::kv("claim", w.ns + "/" + w.name), log::kv("pod_uid", pod_uid),
                 log::kv("error", error.empty() ? std::string("conflicts") : error)});
  }
}

size_t ClaimAllocator::pool_count() const {
  std::lock_guard lock(st_->mu);
  std::set<std::pair<std::string, std::string>> pools;
  for (const auto& [n, s] : st_->slices) pools.insert({s.driver, s.pool});
  return pools.size();
}

size_t ClaimAllocator::claim_count() const {
  std::lock_guard lock(st_->mu);
  return st_->claims.size();
}

size_t ClaimAllocator::class_count() const {
  std::lock_guard lock(st_->mu);
  return st_->classes.size();
}

}  // namespace kgpu::scheduler
