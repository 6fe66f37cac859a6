#include "agent/uninstall.h"

#include <fmt/format.h>

#include <optional>

#include "common/log.h"
#include "k8s/api/json.h"
#include "apiclient/client.h"

namespace kgpu::agent {

using nlohmann::json;

namespace {

// The pod's controller ownerReference, if it has one.
std::optional<json> controller_of(const json& pod) {
  for (const auto& o : k8s::api::list(pod, {"metadata", "ownerReferences"}))
    if (k8s::api::flag(o, {"controller"})) return o;
  return std::nullopt;
}

bool refused(const kube::ApiError& e) { return e.forbidden() || e.unauthorized(); }

}  // namespace

bool owner_readable(kube::Client& client, const std::string& ns, const std::string& pod) {
  auto got = client.get(kube::resources::kPods, ns, pod);
  if (!got) return false;
  const auto owner = controller_of(*got);
  if (!owner || owner->value("kind", "") != "DaemonSet") return false;
  return client.get(kube::resources::kDaemonSets, ns, owner->value("name", "")).has_value();
}

UninstallVerdict uninstall_verdict(kube::Client& client, const std::string& ns, const std::string& pod,
                                   bool access_was_allowed) {
  auto keep = [](std::string why) { return UninstallVerdict{false, std::move(why)}; };
  auto revoked = [&](const std::string& what, const kube::ApiError& e) {
    return UninstallVerdict{true, fmt::format("reading {} is refused now ({}) but was allowed at start: the agent's "
                                              "ServiceAccount or RBAC was deleted",
                                              what, e.text())};
  };
  auto got = client.get(kube::resources::kPods, ns, pod);
  if (!got) {
    if (access_was_allowed && refused(got.error())) return revoked(fmt::format("pod {}/{}", ns, pod), got.error());
    return keep(fmt::format("reading pod {}/{}: {}", ns, pod, got.error().text()));
  }
  const std::optional<json> owner = controller_of(*got);
  if (!owner) {
    return {true, fmt::format("pod {}/{} has no controller owner: nothing starts it again", ns, pod)};
  }
  const std::string kind = owner->value("kind", ""), name = owner->value("name", ""), uid = owner->value("uid", "");
  const std::string api_version = owner->value("apiVersion", "");
  if (kind != "DaemonSet" || !api_version.starts_with("apps/")) {
    return keep(fmt::format("pod {}/{} is owned by {} {} {}, not a DaemonSet", ns, pod, api_version, kind, name));
  }
  auto ds = client.get(kube::resources::kDaemonSets, ns, name);
  if (!ds) {
    if (ds.error().not_found()) return {true, fmt::format("DaemonSet {}/{} is gone", ns, name)};
    if (access_was_allowed && refused(ds.error())) return revoked(fmt::format("DaemonSet {}/{}", ns, name), ds.error());
    return keep(fmt::format("reading DaemonSet {}/{}: {}", ns, name, ds.error().text()));
  }
  if (k8s::api::present(*ds, {"metadata", "deletionTimestamp"})) {
    return {true, fmt::format("DaemonSet {}/{} is being deleted", ns, name)};
  }
  if (!uid.empty() && k8s::api::text(*ds, {"metadata", "uid"}) != uid) {
    return {true, fmt::format("DaemonSet {}/{} was deleted (one of that name with another uid exists)", ns, name)};
  }
  return keep(fmt::format("DaemonSet {}/{} exists: a restart or an upgrade", ns, name));
}

void remove_node_annotation(kube::Client& client, const std::string& node, const std::string& key) {
  auto r = client.patch(kube::resources::kNodes, "", node, kube::PatchType::kMerge,
                        json{{"metadata", {{"annotations", {{key, nullptr}}}}}});
  if (!r) {
    log::warn(fmt::format("uninstall: annotation {} of node {} not removed: {}", key, node, r.error().text()));
  } else {
    log::info(fmt::format("uninstall: annotation {} removed from node {}", key, node));
  }
}

}  // namespace kgpu::agent
