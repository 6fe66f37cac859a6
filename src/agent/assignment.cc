#include "agent/assignment.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "common/timestamp.h"

namespace kgpu::agent {

namespace {

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

PodInfo pod_info(const nlohmann::json& pod) {
  PodInfo p;
  auto obj = k8s::api::decode_pod(pod);
  if (!obj) return p;
  p.ns = obj->ns;
  p.name = obj->name;
  p.uid = obj->uid;
  p.creation = obj->creation;
  p.done = obj->deleting || obj->terminal();
  if (const auto v = obj->annotation(k8s::kAnnotationBoundAt)) p.bound_at = *v;
  if (const auto v = obj->annotation(k8s::kAnnotationGpuResource)) p.gpu_resource = *v;
  if (const auto v = obj->annotation(k8s::kAnnotationGpuAssignment)) {
    auto a = k8s::parse_assignment(*v);
    if (a) {
      p.assignment = std::move(*a);
    } else {
      p.assignment = k8s::Assignment{};
      p.assignment_error = a.error().message;
    }
  }
  if (const auto v = obj->annotation(k8s::kAnnotationGpuAllocated)) {
    if (auto a = k8s::parse_assignment(*v)) p.allocated = std::move(*a);
  }
  p.containers = std::move(obj->containers);
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
