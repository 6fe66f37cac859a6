// The resources the API-server stand-in serves, and the discovery documents that describe them.
//
// A resource is addressed as kube-apiserver addresses it: group ("" for core), version, plural
// name. Kinds not in the built-in table can be added at start (`--resource`) and are then served
// with the same generic semantics.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kgpu::apiserver {

struct ResourceInfo {
  std::string group;  // "" for the core group
  std::string version;
  std::string plural;  // "pods"
  std::string kind;    // "Pod"
  bool namespaced = true;
  bool has_status = false;  // a `status` subresource: the main resource ignores status, it ignores the rest
  std::vector<std::string> short_names;
  std::vector<std::string> categories;
  // Pod-like extra field selectors beyond metadata.name / metadata.namespace.
  std::vector<std::string> field_labels;
  bool builtin = true;  // false for kinds added with --resource (no field validation)

  std::string group_version() const { return group.empty() ? version : group + "/" + version; }
  std::string api_version() const { return group_version(); }
  // "pods" or "deployments.apps": the name used in Status details and RBAC-style messages.
  std::string qualified() const { return group.empty() ? plural : plural + "." + group; }
};

class Registry {
 public:
  Registry();  // the built-in resources

  // Adds a resource given as "group/version/plural/Kind[/cluster]" ("core" or "" for the core group).
  // Returns an error message, empty on success.
  std::string add(std::string_view spec);
  // Stops serving a group-version ("resource.k8s.io/v1", "v1" for the core group), as kube-apiserver's
  // --runtime-config <gv>=false does. Returns an error message, empty on success.
  std::string disable(std::string_view group_version);

  const ResourceInfo* find(std::string_view group, std::string_view version, std::string_view plural) const;
  const ResourceInfo* find_kind(std::string_view api_version, std::string_view kind) const;
  const std::vector<ResourceInfo>& all() const { return resources_; }

  // Discovery documents (legacy, plain JSON).
  nlohmann::json api_versions(std::string_view server_address) const;  // /api
  nlohmann::json group_list() const;                                    // /apis
  // /apis/<group>; null when the group is unknown.
  nlohmann::json group(std::string_view name) const;
  // /api/v1 or /apis/<group>/<version>; null when unknown.
  nlohmann::json resource_list(std::string_view group, std::string_view version) const;
  // /openapi/v3 index and one group-version's document (enough for kubectl's validation).
  nlohmann::json openapi_index() const;
  nlohmann::json openapi_group_version(std::string_view group, std::string_view version) const;

 private:
  std::vector<std::string> group_versions() const;
  std::vector<ResourceInfo> resources_;
};

}  // namespace kgpu::apiserver
