#include "resources.h"

#include <algorithm>
#include <set>

namespace kgpu::apiserver {

using nlohmann::json;

namespace {

const std::vector<std::string> kPodFields = {"spec.nodeName",           "spec.schedulerName", "spec.restartPolicy",
                                             "spec.serviceAccountName", "spec.hostNetwork",   "status.phase",
                                             "status.podIP",            "status.nominatedNodeName"};
const std::vector<std::string> kEventFields = {"involvedObject.kind",      "involvedObject.namespace",
                                               "involvedObject.name",      "involvedObject.uid",
                                               "involvedObject.apiVersion", "involvedObject.resourceVersion",
                                               "involvedObject.fieldPath", "reason",
                                               "reportingComponent",       "source",
                                               "type"};

ResourceInfo res(std::string group, std::string plural, std::string kind, bool namespaced, bool status,
                 std::vector<std::string> short_names = {}, std::vector<std::string> categories = {},
                 std::vector<std::string> fields = {}) {
  return ResourceInfo{std::move(group), "v1",      std::move(plural),      std::move(kind),      namespaced, status,
                      std::move(short_names),      std::move(categories), std::move(fields)};
}

json verbs(bool all) {
  if (!all) return json::array({"get", "patch", "update"});
  return json::array({"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"});
}

std::string singular(const ResourceInfo& r) {
  std::string s = r.kind;
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Registry::Registry() {
  resources_ = {
      res("", "pods", "Pod", true, true, {"po"}, {"all"}, kPodFields),
      res("", "nodes", "Node", false, true, {"no"}, {}, {"spec.unschedulable"}),
      res("", "namespaces", "Namespace", false, true, {"ns"}, {}, {"status.phase"}),
      res("", "events", "Event", true, false, {"ev"}, {}, kEventFields),
      res("", "configmaps", "ConfigMap", true, false, {"cm"}),
      res("", "secrets", "Secret", true, false, {}, {}, {"type"}),
      res("", "services", "Service", true, true, {"svc"}, {"all"}),
      res("", "serviceaccounts", "ServiceAccount", true, false, {"sa"}),
      res("", "resourcequotas", "ResourceQuota", true, true, {"quota"}),
      res("", "limitranges", "LimitRange", true, false, {"limits"}),
      res("apps", "deployments", "Deployment", true, true, {"deploy"}, {"all"}),
      res("apps", "replicasets", "ReplicaSet", true, true, {"rs"}, {"all"}),
      res("apps", "daemonsets", "DaemonSet", true, true, {"ds"}, {"all"}),
      res("apps", "statefulsets", "StatefulSet", true, true, {"sts"}, {"all"}),
      res("batch", "jobs", "Job", true, true, {}, {"all"}),
      res("batch", "cronjobs", "CronJob", true, true, {"cj"}, {"all"}),
      res("", "persistentvolumeclaims", "PersistentVolumeClaim", true, true, {"pvc"}),
      res("scheduling.k8s.io", "priorityclasses", "PriorityClass", false, false, {"pc"}),
      res("policy", "poddisruptionbudgets", "PodDisruptionBudget", true, true, {"pdb"}),
      // Stored and served, not applied: admission policies are kube-apiserver's.
      res("admissionregistration.k8s.io", "mutatingadmissionpolicies", "MutatingAdmissionPolicy", false, false),
      res("admissionregistration.k8s.io", "mutatingadmissionpolicybindings", "MutatingAdmissionPolicyBinding", false,
          false),
      ResourceInfo{"autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", true, true, {"hpa"},
                   {"all"}, {}},
      res("events.k8s.io", "events", "Event", true, false, {"ev"}, {}, {"regarding.kind", "regarding.name",
                                                                            "regarding.namespace", "reason", "type",
                                                                            "reportingController"}),
      res("coordination.k8s.io", "leases", "Lease", true, false),
      res("resource.k8s.io", "deviceclasses", "DeviceClass", false, false),
      res("resource.k8s.io", "resourceclaims", "ResourceClaim", true, true),
      res("resource.k8s.io", "resourceclaimtemplates", "ResourceClaimTemplate", true, false),
      res("resource.k8s.io", "resourceslices", "ResourceSlice", false, false, {}, {},
          {"spec.nodeName", "spec.driver"}),
  };
}

std::string Registry::add(std::string_view spec) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t slash = spec.find('/', start);
    parts.emplace_back(spec.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (parts.size() != 4 && parts.size() != 5) return "expected group/version/plural/Kind[/cluster]";
  if (parts.size() == 5 && parts[4] != "cluster" && parts[4] != "namespaced") {
    return "the fifth part must be 'cluster' or 'namespaced'";
  }
  ResourceInfo r;
  r.group = parts[0] == "core" ? "" : parts[0];
  r.version = parts[1];
  r.plural = parts[2];
  r.kind = parts[3];
  r.namespaced = parts.size() == 4 || parts[4] == "namespaced";
  r.builtin = false;
  if (r.version.empty() || r.plural.empty() || r.kind.empty()) return "version, plural and Kind must not be empty";
  if (find(r.group, r.version, r.plural) != nullptr) return "already served: " + r.qualified();
  resources_.push_back(std::move(r));
  return {};
}

std::string Registry::disable(std::string_view group_version) {
  const auto before = resources_.size();
  std::erase_if(resources_, [&](const ResourceInfo& r) { return r.group_version() == group_version; });
  return resources_.size() == before ? "not served: " + std::string(group_version) : std::string();
}

const ResourceInfo* Registry::find(std::string_view group, std::string_view version, std::string_view plural) const {
  for (const auto& r : resources_) {
    if (r.group == group && r.version == version && r.plural == plural) return &r;
  }
  return nullptr;
}

const ResourceInfo* Registry::find_kind(std::string_view api_version, std::string_view kind) const {
  for (const auto& r : resources_) {
    if (r.api_version() == api_version && r.kind == kind) return &r;
  }
  return nullptr;
}

std::vector<std::string> Registry::group_versions() const {
  std::vector<std::string> out;
  for (const auto& r : resources_) {
    if (r.group.empty()) continue;
    const std::string gv = r.group_version();
    if (std::find(out.begin(), out.end(), gv) == out.end()) out.push_back(gv);
  }
  return out;
}

json Registry::api_versions(std::string_view server_address) const {
  return json{{"kind", "APIVersions"},
              {"versions", json::array({"v1"})},
              {"serverAddressByClientCIDRs",
               json::array({json{{"clientCIDR", "0.0.0.0/0"}, {"serverAddress", std::string(server_address)}}})}};
}

json Registry::group_list() const {
  json groups = json::array();
  for (const auto& gv : group_versions()) {
    const std::string name = gv.substr(0, gv.find('/'));
    groups.push_back(group(name));
  }
  return json{{"kind", "APIGroupList"}, {"apiVersion", "v1"}, {"groups", std::move(groups)}};
}

json Registry::group(std::string_view name) const {
  json versions = json::array();
  std::set<std::string> seen;
  for (const auto& r : resources_) {
    if (r.group != name || !seen.insert(r.version).second) continue;
    versions.push_back(json{{"groupVersion", r.group_version()}, {"version", r.version}});
  }
  if (versions.empty() || name.empty()) return nullptr;
  return json{{"kind", "APIGroup"},
              {"apiVersion", "v1"},
              {"name", std::string(name)},
              {"versions", versions},
              {"preferredVersion", versions[0]}};
}

json Registry::resource_list(std::string_view group, std::string_view version) const {
  json list = json::array();
  for (const auto& r : resources_) {
    if (r.group != group || r.version != version) continue;
    json main{{"name", r.plural},
              {"singularName", singular(r)},
              {"namespaced", r.namespaced},
              {"kind", r.kind},
              {"verbs", verbs(true)}};
    if (!r.short_names.empty()) main["shortNames"] = r.short_names;
    if (!r.categories.empty()) main["categories"] = r.categories;
    list.push_back(std::move(main));
    if (r.has_status) {
      list.push_back(json{{"name", r.plural + "/status"},
                          {"singularName", ""},
                          {"namespaced", r.namespaced},
                          {"kind", r.kind},
                          {"verbs", verbs(false)}});
    }
    if (r.group.empty() && r.plural == "pods") {
      list.push_back(json{{"name", "bindings"},
                          {"singularName", "binding"},
                          {"namespaced", true},
                          {"kind", "Binding"},
                          {"verbs", json::array({"create"})}});
      list.push_back(json{{"name", "pods/binding"},
                          {"singularName", ""},
                          {"namespaced", true},
                          {"kind", "Binding"},
                          {"verbs", json::array({"create"})}});
      list.push_back(json{{"name", "pods/log"},
                          {"singularName", ""},
                          {"namespaced", true},
                          {"kind", "Pod"},
                          {"verbs", json::array({"get"})}});
    }
  }
  if (list.empty()) return nullptr;
  const std::string gv = group.empty() ? std::string(version) : std::string(group) + "/" + std::string(version);
  return json{{"kind", "APIResourceList"}, {"apiVersion", "v1"}, {"groupVersion", gv}, {"resources", list}};
}

json Registry::openapi_index() const {
  json paths = json::object();
  paths["api/v1"] = json{{"serverRelativeURL", "/openapi/v3/api/v1"}};
  for (const auto& gv : group_versions()) paths["apis/" + gv] = json{{"serverRelativeURL", "/openapi/v3/apis/" + gv}};
  return json{{"paths", paths}};
}

json Registry::openapi_group_version(std::string_view group, std::string_view version) const {
  json paths = json::object();
  for (const auto& r : resources_) {
    if (r.group != group || r.version != version) continue;
    const std::string base = (r.group.empty() ? "/api/" : "/apis/" + r.group + "/") + r.version;
    const std::string path = base + (r.namespaced ? "/namespaces/{namespace}/" : "/") + r.plural + "/{name}";
    const json gvk{{"group", r.group}, {"version", r.version}, {"kind", r.kind}};
    const json field_validation{{"name", "fieldValidation"},
                                {"in", "query"},
                                {"description", "Ignore, Warn or Strict"},
                                {"schema", json{{"type", "string"}, {"uniqueItems", true}}}};
    json op{{"operationId", "patch" + r.kind},
            {"x-kubernetes-action", "patch"},
            {"x-kubernetes-group-version-kind", gvk},
            {"parameters", json::array({field_validation})},
            {"responses", json{{"200", json{{"description", "OK"}}}}}};
    paths[path] = json{{"patch", op}};
  }
  if (paths.empty()) return nullptr;
  return json{{"openapi", "3.0.0"},
              {"info", json{{"title", "Kubernetes"}, {"version", "v1.35.0"}}},
              {"paths", paths},
              {"components", json{{"schemas", json::object()}}}};
}

}  // namespace kgpu::apiserver
