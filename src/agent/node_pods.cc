#include "agent/node_pods.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/log.h"
#include "k8s/gpu_assignment.h"

namespace kgpu::agent {

bool pod_uses_any(const nlohmann::json& pod, const std::vector<std::string>& uuids) {
  const auto ann = pod.value("metadata", nlohmann::json::object()).value("annotations", nlohmann::json::object());
  for (const char* key : {k8s::kAnnotationGpuAllocated, k8s::kAnnotationGpuAssignment}) {
    if (!ann.contains(key) || !ann[key].is_string()) continue;
    auto a = k8s::parse_assignment(ann[key].get<std::string>());
    if (!a) continue;
    for (const auto& c : *a) {
      for (const auto& u : c.uuids) {
        if (std::find(uuids.begin(), uuids.end(), u) != uuids.end()) return true;
      }
    }
    return false;
  }
  return false;
}

bool pod_finished(const nlohmann::json& pod) {
  const auto phase = pod.value("status", nlohmann::json::object()).value("phase", "");
  return phase == "Succeeded" || phase == "Failed";
}

health::PodRef pod_ref(const nlohmann::json& pod) {
  const auto m = pod.value("metadata", nlohmann::json::object());
  return {m.value("namespace", ""), m.value("name", ""), m.value("uid", "")};
}

std::string pod_names(const std::vector<health::PodRef>& pods) {
  std::string s;
  for (size_t i = 0; i < pods.size() && i < 8; ++i) s += (i ? ", " : "") + pods[i].ns + "/" + pods[i].name;
  if (pods.size() > 8) s += fmt::format(" and {} more", pods.size() - 8);
  return s;
}

Result<health::Eviction> evict_pod(kube::Client& client, const health::PodRef& p) {
  nlohmann::json body = {{"apiVersion", "policy/v1"}, {"kind", "Eviction"}, {"metadata", {{"name", p.name}, {"namespace", p.ns}}}};
  if (!p.uid.empty()) body["deleteOptions"] = {{"preconditions", {{"uid", p.uid}}}};
  auto r = client.create(kube::resources::kPods, p.ns, body, "eviction", p.name);
  if (r) {
    log::info("evicted " + p.ns + "/" + p.name);
    return health::Eviction{};
  }
  if (r.error().not_found()) return health::Eviction{health::EvictOutcome::kGone, ""};
  if (r.error().too_many_requests()) return health::Eviction{health::EvictOutcome::kBlocked, r.error().message};
  return std::unexpected(r.error().to_error());
}

}  // namespace kgpu::agent
