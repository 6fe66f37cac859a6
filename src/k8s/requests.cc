// What pods ask for: effective container requests, pod totals with init containers and overhead
// (k8s/objects.h), and the invalid quantities of any view.
#include <algorithm>

#include "k8s/objects.h"

namespace kgpu::k8s {

// -----------------------------------------------------------------------------------------------
// Requests
QuantityMap effective_requests(const Container& container) {
  // Limits, then requests, the last of a name winning: a request wins over the limit of its name.
  std::vector<QuantityMap::value_type> kv;
  kv.reserve(container.resources.requests.size() + container.resources.limits.size());
  for (const auto& e : container.resources.limits) kv.push_back(e);
  for (const auto& e : container.resources.requests) kv.push_back(e);
  QuantityMap out;
  out.assign_last_wins(std::move(kv));
  return out;
}

namespace {

Quantity request_of(const Container& c, std::string_view resource) {
  if (auto it = c.resources.requests.find(resource); it != c.resources.requests.end()) return it->second.value;
  if (auto it = c.resources.limits.find(resource); it != c.resources.limits.end()) return it->second.value;
  return {};
}

}  // namespace

Quantity pod_request(const PodSpec& spec, std::string_view resource) {
  Quantity sum;
  for (const Container& c : spec.containers) sum += request_of(c, resource);
  Quantity sidecars;
  Quantity init_max;
  for (const Container& c : spec.init_containers) {
    const Quantity r = request_of(c, resource);
    Quantity during;
    if (c.is_sidecar()) {
      sum += r;
      sidecars += r;
      during = sidecars;
    } else {
      during = r + sidecars;
    }
    init_max = std::max(init_max, during);
  }
  Quantity total = std::max(sum, init_max);
  if (auto it = spec.overhead.find(resource); it != spec.overhead.end()) total += it->second.value;
  return total;
}

std::map<std::string, Quantity, std::less<>> pod_requests(const PodSpec& spec) {
  std::map<std::string, Quantity, std::less<>> out;
  const auto collect = [&](const QuantityMap& m) {
    for (const auto& [name, q] : m) out.try_emplace(std::string(name));
  };
  for (const auto* list : {&spec.containers, &spec.init_containers}) {
    for (const Container& c : *list) {
      collect(c.resources.requests);
      collect(c.resources.limits);
    }
  }
  collect(spec.overhead);
  for (auto& [name, q] : out) q = pod_request(spec, name);
  return out;
}

std::vector<Issue> quantity_issues(const Document& doc) {
  std::vector<Issue> all;
  if (auto v = as_pod(doc)) {
    all = std::move(v->issues);
  } else if (auto w = as_workload(doc)) {
    all = std::move(w->issues);
  } else if (auto j = as_job(doc)) {
    all = std::move(j->issues);
  } else if (auto c = as_cron_job(doc)) {
    all = std::move(c->issues);
  } else if (auto n = as_node(doc)) {
    all = std::move(n->issues);
  } else if (auto q = as_resource_quota(doc)) {
    all = std::move(q->issues);
  } else if (auto pvc = as_persistent_volume_claim(doc)) {
    all = std::move(pvc->issues);
  } else if (auto rs = as_resource_slice(doc)) {
    all = std::move(rs->issues);
  }
  std::erase_if(all, [](const Issue& i) { return !i.invalid_quantity; });
  std::stable_sort(all.begin(), all.end(), [](const Issue& a, const Issue& b) { return a.line < b.line; });
  return all;
}

}  // namespace kgpu::k8s
