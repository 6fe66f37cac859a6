#include "doctor/collect.h"

#include <fmt/format.h>

#include <ctime>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/timestamp.h"
#include "k8s/gpu_resources.h"
#include "apiclient/client.h"
#include "apiclient/config.h"

namespace kgpu::doctor {

namespace {

bool is_stack_pod(const nlohmann::json& pod) {
  const std::string name = pod.value("/metadata/name"_json_pointer, std::string());
  std::string app;
  if (auto it = pod["metadata"].find("labels"); it != pod["metadata"].end() && it->is_object()) {
    app = it->value("app", it->value("app.kubernetes.io/name", std::string()));
  }
  for (const std::string& s : {app, name}) {
    for (const char* prefix :
         {"nvidia-driver", "nvidia-container-toolkit", "nvidia-device-plugin", "nvidia-operator-validator",
          "nvidia-cuda-validator", "nvidia-mig-manager", "nvidia-dcgm-exporter", "kgpu-agent"}) {
      if (s.rfind(prefix, 0) == 0) return true;
    }
  }
  return false;
}

bool requests_gpu(const nlohmann::json& pod) {
  const auto& cs = pod["spec"]["containers"];
  if (!cs.is_array()) return false;
  for (const auto& c : cs) {
    for (const char* k : {"limits", "requests"}) {
      auto r = c.find("resources");
      if (r == c.end() || !r->contains(k)) continue;
      for (const auto& [name, v] : (*r)[k].items()) {
        if (k8s::is_nvidia_resource(name)) return true;
      }
    }
  }
  return false;
}

bool failing(const nlohmann::json& pod) {
  const auto& st = pod["status"];
  if (st.value("phase", "") == "Failed") return true;
  if (auto cs = st.find("containerStatuses"); cs != st.end() && cs->is_array()) {
    for (const auto& c : *cs) {
      if (c.value("restartCount", 0) > 0 || !c.value("ready", true)) return true;
    }
  }
  return false;
}

}  // namespace

namespace {

struct Kind {
  const char* name;  // what errors call it (kubectl's resource name)
  kube::Resource resource;
};

// The kinds doctor's rules read. The first group must mostly succeed; the second may be absent.
const std::vector<Kind>& core_kinds() {
  static const std::vector<Kind> kinds = {
      {"nodes", kube::resources::kNodes},
      {"pods", kube::resources::kPods},
      {"events", kube::resources::kEvents},
      {"deployments", kube::resources::kDeployments},
      {"replicasets", kube::resources::kReplicaSets},
      {"statefulsets", kube::resources::kStatefulSets},
      {"daemonsets", kube::resources::kDaemonSets},
      {"jobs", kube::resources::kJobs},
      {"cronjobs", {"batch", "v1", "cronjobs", true, "CronJob"}},
      {"resourcequotas", {"", "v1", "resourcequotas", true, "ResourceQuota"}},
      {"priorityclasses", {"scheduling.k8s.io", "v1", "priorityclasses", false, "PriorityClass"}},
      {"poddisruptionbudgets", {"policy", "v1", "poddisruptionbudgets", true, "PodDisruptionBudget"}},
      {"namespaces", kube::resources::kNamespaces},
      {"services", {"", "v1", "services", true, "Service"}},
      {"persistentvolumeclaims", {"", "v1", "persistentvolumeclaims", true, "PersistentVolumeClaim"}},
      {"horizontalpodautoscalers", {"autoscaling", "v2", "horizontalpodautoscalers", true, "HorizontalPodAutoscaler"}},
  };
  return kinds;
}

const std::vector<Kind>& optional_kinds() {
  static const std::vector<Kind> kinds = {
      {"prometheusrules", {"monitoring.coreos.com", "v1", "prometheusrules", true, "PrometheusRule"}},
      {"servicemonitors", {"monitoring.coreos.com", "v1", "servicemonitors", true, "ServiceMonitor"}},
      {"podmonitors", {"monitoring.coreos.com", "v1", "podmonitors", true, "PodMonitor"}},
      {"resourceclaims", kube::resources::kResourceClaims},
      {"resourceclaimtemplates", kube::resources::kResourceClaimTemplates},
      {"deviceclasses", kube::resources::kDeviceClasses},
      {"resourceslices", kube::resources::kResourceSlices},
  };
  return kinds;
}

// kubectl's wording for an error, so snapshots read the same whoever collected them.
std::string list_error(const Kind& k, const kube::ApiError& e) {
  if (e.not_found()) return fmt::format("the server doesn't have a resource type \"{}\"", k.name);
  if (e.code == 0) return fmt::format("{}: {}", k.name, e.text());
  return fmt::format("Error from server ({}): {}", e.reason, e.message);
}

}  // namespace

Result<std::string> collect_snapshot(const CollectOptions& o) {
  kube::LoadOptions lo;
  lo.kubeconfig = o.kubeconfig;
  lo.context = o.context;
  auto config = kube::load_config(lo);
  if (!config) return std::unexpected(config.error().wrap("collecting the snapshot"));
  config->timeout = o.request_timeout;
  config->user_agent = "kgpu-doctor";
  kube::ClientOptions client_options;
  client_options.max_retries = 2;  // a person is waiting: fail within a few timeouts
  auto client = kube::Client::create(*config, client_options);
  if (!client) return std::unexpected(client.error().wrap("collecting the snapshot"));
  kube::Client& c = **client;

  nlohmann::json items = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  const auto take = [&](const Kind& k) -> std::optional<kube::ApiError> {
    auto listed = c.list_all(k.resource, "", {});
    if (!listed) return listed.error();
    for (auto& it : *listed) {
      // Typed lists leave kind and apiVersion out of their items; the snapshot needs them.
      if (!it.contains("kind")) it["kind"] = k.resource.kind;
      if (!it.contains("apiVersion")) it["apiVersion"] = k.resource.api_version();
      items.push_back(std::move(it));
    }
    return std::nullopt;
  };
  int core_ok = 0;
  std::optional<kube::ApiError> first_error;
  for (const auto& k : core_kinds()) {
    if (auto e = take(k)) {
      if (e->code == 0 && e->reason.empty()) {
        // No answer at all: the cluster is not reachable; do not try every other kind.
        return fail(ErrorCode::kUnavailable, "collecting the snapshot from {} ({}): {}", config->server,
                    config->source, e->text());
      }
      errors.push_back(list_error(k, *e));
      if (!first_error) first_error = e;
    } else {
      ++core_ok;
    }
  }
  if (core_ok == 0) {
    return fail(ErrorCode::kUnavailable, "collecting the snapshot from {}: {}", config->server,
                first_error ? first_error->text() : "no kind could be listed");
  }
  for (const auto& k : optional_kinds()) {
    if (auto e = take(k)) errors.push_back(list_error(k, *e));
  }
  std::string server_version;
  if (auto v = c.get_raw("/version")) {
    auto j = nlohmann::json::parse(*v, nullptr, false);
    if (j.is_object()) server_version = j.value("gitVersion", "");
  }
  // Logs.
  nlohmann::json logs = nlohmann::json::array();
  int app_logs = 0;
  for (const auto& item : items) {
    if (item.value("kind", "") != "Pod") continue;
    const bool stack = is_stack_pod(item);
    if (!stack && !(requests_gpu(item) && failing(item) && app_logs < o.max_app_logs)) continue;
    if (!stack) ++app_logs;
    const std::string ns = item["metadata"].value("namespace", "default");
    const std::string name = item["metadata"].value("name", "");
    std::vector<std::pair<std::string, int64_t>> containers;
    for (const char* list_key : {"initContainerStatuses", "containerStatuses"}) {
      auto st = item["status"].find(list_key);
      if (st == item["status"].end() || !st->is_array()) continue;
      for (const auto& cs : *st) containers.emplace_back(cs.value("name", ""), cs.value("restartCount", int64_t{0}));
    }
    for (const auto& [container, restarts] : containers) {
      for (bool previous : {false, true}) {
        if (previous && restarts == 0) continue;
        auto text = c.logs(ns, name, container, o.tail, previous);
        if (!text || text->empty()) continue;  // a container that has not started has no log
        logs.push_back({{"apiVersion", "kgpu.io/v1"},
                        {"kind", "ContainerLog"},
                        {"metadata", {{"namespace", ns}, {"name", name}}},
                        {"container", container},
                        {"previous", previous},
                        {"text", *text}});
      }
    }
  }
  nlohmann::json info = {{"apiVersion", "kgpu.io/v1"},
                         {"kind", "SnapshotInfo"},
                         {"metadata", {{"name", "snapshot"}}},
                         {"collectedAt", o.collected_at.empty() ? format_rfc3339(std::chrono::system_clock::now()) : o.collected_at},
                         {"serverVersion", server_version},
                         {"server", config->server},
                         {"context", config->context},
                         {"errors", errors}};
  nlohmann::json out = {{"apiVersion", "v1"}, {"kind", "List"}, {"metadata", nlohmann::json::object()}};
  nlohmann::json all = nlohmann::json::array();
  all.push_back(std::move(info));
  for (auto& it : items) all.push_back(std::move(it));
  for (auto& l : logs) all.push_back(std::move(l));
  out["items"] = std::move(all);
  return out.dump(1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace kgpu::doctor
