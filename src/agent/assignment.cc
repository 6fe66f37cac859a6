#include "agent/assignment.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "common/timestamp.h"
#include "k8s/quantity.h"

namespace kgpu::agent {

namespace {

const std::string* annotation(const nlohmann::json& pod, const char* key) {
  const auto m = pod.find("metadata");
  if (m == pod.end() || !m->is_object()) return nullptr;
  const auto a = m->find("annotations");
  if (a == m->end() || !a->is_object()) return nullptr;
  const auto v = a->find(key);
  return v != a->end() && v->is_string() ? v->get_ptr<const std::string*>() : nullptr;
}

std::string text_at(const nlohmann::json& obj, const char* key) {
  const auto v = obj.find(key);
  return v != obj.end() && v->is_string() ? v->get<std::string>() : std::string();
}

// Whole units of an extended-resource quantity ("2", 2); nullopt for anything else.
std::optional<int64_t> units(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<int64_t>();
  if (!v.is_string()) return std::nullopt;
  auto q = k8s::Quantity::parse(v.get<std::string>());
  if (!q) return std::nullopt;
  return q->value();
}

void read_containers(const nlohmann::json& spec, const char* key, bool init, std::vector<PodContainer>& out) {
  const auto list = spec.find(key);
  if (list == spec.end() || !list->is_array()) return;
  for (const auto& c : *list) {
    if (!c.is_object()) continue;
    PodContainer pc;
    pc.name = text_at(c, "name");
    pc.init = init;
    pc.sidecar = init && text_at(c, "restartPolicy") == "Always";
    const auto res = c.find("resources");
    if (res != c.end() && res->is_object()) {
      // Requests first; a resource only in limits is requested at its limit.
      for (const char* part : {"requests", "limits"}) {
        const auto m = res->find(part);
        if (m == res->end() || !m->is_object()) continue;
        for (const auto& [name, value] : m->items()) {
          if (std::ranges::any_of(pc.requests, [&](const auto& r) { return r.first == name; })) continue;
          if (auto n = units(value)) pc.requests.emplace_back(name, *n);
        }
      }
    }
    out.push_back(std::move(pc));
  }
}

// (seconds, nanoseconds) of a MicroTime; the maximum when it does not parse.
std::pair<int64_t, int64_t> instant(const std::string& t) {
  constexpr std::pair<int64_t, int64_t> kLast{std::numeric_limits<int64_t>::max(), 0};
  const auto tp = parse_rfc3339(t);
  if (!tp) return kLast;
  const int64_t s = std::chrono::duration_cast<std::chrono::seconds>(tp->time_since_epoch()).count();
  int64_t ns = 0;
  if (const auto dot = t.find('.'); dot != std::string::npos) {
    int digits = 0;
    for (size_t i = dot + 1; i < t.size() && std::isdigit(static_cast<unsigned char>(t[i])) && digits < 9; ++i, ++digits) {
      ns = ns * 10 + (t[i] - '0');
    }
    for (; digits < 9; ++digits) ns *= 10;
  }
  return {s, ns};
}

}  // namespace

int64_t PodContainer::request(const std::string& resource) const {
  for (const auto& [name, n] : requests) {
    if (name == resource) return n;
  }
  return 0;
}

PodInfo pod_info(const nlohmann::json& pod) {
  PodInfo p;
  if (!pod.is_object()) return p;
  if (const auto m = pod.find("metadata"); m != pod.end() && m->is_object()) {
    p.ns = text_at(*m, "namespace");
    p.name = text_at(*m, "name");
    p.uid = text_at(*m, "uid");
    p.creation = text_at(*m, "creationTimestamp");
    p.done = m->contains("deletionTimestamp") && !(*m)["deletionTimestamp"].is_null();
  }
  if (const auto* v = annotation(pod, k8s::kAnnotationBoundAt)) p.bound_at = *v;
  if (const auto* v = annotation(pod, k8s::kAnnotationGpuResource)) p.gpu_resource = *v;
  if (const auto* v = annotation(pod, k8s::kAnnotationGpuAssignment)) {
    auto a = k8s::parse_assignment(*v);
    if (a) {
      p.assignment = std::move(*a);
    } else {
      p.assignment = k8s::Assignment{};
      p.assignment_error = a.error().message;
    }
  }
  if (const auto* v = annotation(pod, k8s::kAnnotationGpuAllocated)) {
    if (auto a = k8s::parse_assignment(*v)) p.allocated = std::move(*a);
  }
  if (const auto s = pod.find("status"); s != pod.end() && s->is_object()) {
    const std::string phase = text_at(*s, "phase");
    if (phase == "Succeeded" || phase == "Failed") p.done = true;
  }
  if (const auto spec = pod.find("spec"); spec != pod.end() && spec->is_object()) {
    read_containers(*spec, "initContainers", true, p.containers);
    read_containers(*spec, "containers", false, p.containers);
  }
  return p;
}

const PodContainer* next_container(const PodInfo& pod, const std::string& resource, const Served& served) {
  for (const auto& c : pod.containers) {
    if (c.request(resource) <= 0) continue;
    if (k8s::find_container(pod.allocated, c.name) != nullptr) continue;
    if (served.contains({pod.uid, c.name})) continue;
    return &c;
  }
  return nullptr;
}

bool earlier(const std::string& a, const std::string& b) { return instant(a) < instant(b); }

std::optional<Candidate> choose_candidate(const std::vector<PodInfo>& pods, const std::string& resource, int64_t n,
                                          const Served& served) {
  std::optional<Candidate> best;
  auto key = [](const PodInfo& p) { return std::tuple(instant(p.bound_at), instant(p.creation), p.ns, p.name); };
  for (const auto& p : pods) {
    if (p.done || p.gpu_resource != resource || !p.assignment) continue;
    const PodContainer* c = next_container(p, resource, served);
    if (c == nullptr || c->request(resource) != n) continue;
    if (!best || key(p) < key(*best->pod)) best = Candidate{&p, c};
  }
  return best;
}

}  // namespace kgpu::agent
