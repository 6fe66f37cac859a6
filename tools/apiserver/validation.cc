#include "validation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <span>
#include <string_view>

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

using Names = std::span<const std::string_view>;

bool in(Names names, std::string_view s) { return std::find(names.begin(), names.end(), s) != names.end(); }
bool in(std::initializer_list<std::string_view> names, std::string_view s) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

constexpr std::string_view kCommonTop[] = {"apiVersion", "kind", "metadata", "spec", "status"};
constexpr std::string_view kMeta[] = {"name",  "generateName",     "namespace",   "selfLink",   "uid",
                         "resourceVersion",  "generation",  "creationTimestamp", "deletionTimestamp",
                         "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences", "finalizers",
                         "managedFields"};
constexpr std::string_view kPodSpec[] = {
    "activeDeadlineSeconds", "affinity", "automountServiceAccountToken", "containers", "dnsConfig", "dnsPolicy",
    "enableServiceLinks", "ephemeralContainers", "hostAliases", "hostIPC", "hostNetwork", "hostPID", "hostUsers",
    "hostname", "hostnameOverride", "imagePullSecrets", "initContainers", "nodeName", "nodeSelector", "os", "overhead",
    "preemptionPolicy", "priority", "priorityClassName", "readinessGates", "resourceClaims", "resources",
    "restartPolicy", "runtimeClassName", "schedulerName", "schedulingGates", "securityContext", "serviceAccount",
    "serviceAccountName", "setHostnameAsFQDN", "shareProcessNamespace", "subdomain", "terminationGracePeriodSeconds",
    "tolerations", "topologySpreadConstraints", "volumes", "workloadRef"};
constexpr std::string_view kContainer[] = {
    "args", "command", "env", "envFrom", "image", "imagePullPolicy", "lifecycle", "livenessProbe", "name", "ports",
    "readinessProbe", "resizePolicy", "resources", "restartPolicy", "restartPolicyRules", "securityContext",
    "startupProbe", "stdin", "stdinOnce", "terminationMessagePath", "terminationMessagePolicy", "tty", "volumeDevices",
    "volumeMounts", "workingDir"};
constexpr std::string_view kResources[] = {"claims", "limits", "requests"};
constexpr std::string_view kEvent[] = {"involvedObject", "reason", "message", "source", "firstTimestamp", "lastTimestamp", "count",
                          "type", "eventTime", "series", "action", "related", "reportingComponent",
                          "reportingInstance", "regarding", "note", "reportingController", "deprecatedSource",
                          "deprecatedFirstTimestamp", "deprecatedLastTimestamp", "deprecatedCount"};

bool known_top(const std::string& kind, std::string_view f) {
  if (in(kCommonTop, f)) return true;
  if (kind == "ConfigMap") return in({"data", "binaryData", "immutable"}, f);
  if (kind == "Secret") return in({"data", "stringData", "type", "immutable"}, f);
  if (kind == "ServiceAccount") return in({"secrets", "imagePullSecrets", "automountServiceAccountToken"}, f);
  if (kind == "Event") return in(kEvent, f);
  return false;
}

void check_object(const json& o, Names known, const std::string& prefix, std::vector<std::string>& out) {
  if (!o.is_object()) return;
  for (const auto& [k, v] : o.items()) {
    if (!in(known, k)) out.push_back(prefix + k);
  }
}

std::string quantity_text(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return v.dump();
  const double d = v.get<double>();
  if (d == std::floor(d) && std::fabs(d) < 1e15) return fmt::format("{}", static_cast<int64_t>(d));
  return fmt::format("{}m", static_cast<int64_t>(std::llround(d * 1000)));
}

void normalize_map(json* m) {
  if (m == nullptr || !m->is_object()) return;
  for (auto& [k, v] : m->items()) {
    if (v.is_number()) v = quantity_text(v);
  }
}

json* child(json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  const auto it = o.find(key);
  return it == o.end() ? nullptr : &*it;
}

}  // namespace

std::vector<std::string> unknown_fields(const ResourceInfo& res, const json& object) {
  std::vector<std::string> out;
  if (!res.builtin || !object.is_object()) return out;
  for (const auto& [k, v] : object.items()) {
    if (!known_top(res.kind, k)) out.push_back(k);
  }
  if (const auto m = object.find("metadata"); m != object.end()) check_object(*m, kMeta, "metadata.", out);
  if (res.kind == "Pod" && res.group.empty()) {
    const auto spec = object.find("spec");
    if (spec == object.end() || !spec->is_object()) return out;
    check_object(*spec, kPodSpec, "spec.", out);
    for (const char* list : {"containers", "initContainers"}) {
      const auto cs = spec->find(list);
      if (cs == spec->end() || !cs->is_array()) continue;
      for (size_t i = 0; i < cs->size(); ++i) {
        const std::string p = fmt::format("spec.{}[{}].", list, i);
        check_object((*cs)[i], kContainer, p, out);
        if ((*cs)[i].is_object() && (*cs)[i].contains("resources")) {
          check_object((*cs)[i]["resources"], kResources, p + "resources.", out);
        }
      }
    }
  }
  return out;
}

namespace {

void normalize_pod_spec(json* spec) {
  if (spec == nullptr) return;
  normalize_map(child(*spec, "overhead"));
  if (json* r = child(*spec, "resources")) {
    normalize_map(child(*r, "limits"));
    normalize_map(child(*r, "requests"));
  }
  for (const char* list : {"containers", "initContainers"}) {
    json* cs = child(*spec, list);
    if (cs == nullptr || !cs->is_array()) continue;
    for (auto& c : *cs) {
      if (json* r = child(c, "resources")) {
        normalize_map(child(*r, "limits"));
        normalize_map(child(*r, "requests"));
      }
    }
  }
}

}  // namespace

void normalize_quantities(const ResourceInfo& res, json& object) {
  if (res.group == "apps" || (res.group == "batch" && res.kind == "Job")) {  // the pod template's spec
    json* spec = child(object, "spec");
    json* tmpl = spec != nullptr ? child(*spec, "template") : nullptr;
    normalize_pod_spec(tmpl != nullptr ? child(*tmpl, "spec") : nullptr);
    return;
  }
  if (!res.group.empty()) return;
  if (res.kind == "Pod") {
    normalize_pod_spec(child(object, "spec"));
  } else if (res.kind == "Node") {
    if (json* st = child(object, "status")) {
      normalize_map(child(*st, "capacity"));
      normalize_map(child(*st, "allocatable"));
    }
  } else if (res.kind == "ResourceQuota") {
    if (json* spec = child(object, "spec")) normalize_map(child(*spec, "hard"));
    if (json* st = child(object, "status")) {
      normalize_map(child(*st, "hard"));
      normalize_map(child(*st, "used"));
    }
  } else if (res.kind == "LimitRange") {
    json* spec = child(object, "spec");
    json* limits = spec != nullptr ? child(*spec, "limits") : nullptr;
    if (limits == nullptr || !limits->is_array()) return;
    for (auto& l : *limits) {
      for (const char* f : {"max", "min", "default", "defaultRequest", "maxLimitRequestRatio"}) normalize_map(child(l, f));
    }
  }
}

}  // namespace kgpu::apiserver
