// kgpu doctor's driver: which pods and nodes are in scope, the walk through the layers for each pod,
// and the order the rule families run in.
#include <fmt/format.h>

#include <algorithm>

#include "doctor/diagnoser.h"

namespace kgpu::doctor::detail {

bool Diagnoser::in_scope_ns(sv ns) const {
  switch (o_.target.kind) {
    case Target::Kind::kCluster:
      return true;
    case Target::Kind::kNamespace:
      return ns == o_.target.ns;
    default:
      return false;
  }
}

bool Diagnoser::in_scope_pod(const PodObj& p) const {
  switch (o_.target.kind) {
    case Target::Kind::kCluster:
      return true;
    case Target::Kind::kNamespace:
      return p.ns() == o_.target.ns;
    case Target::Kind::kPod:
      return p.ns() == o_.target.ns && p.name() == o_.target.name;
    case Target::Kind::kNode:
      return *p.v.spec.node_name == o_.target.name;
  }
  return false;
}

bool Diagnoser::in_scope_node(const NodeObj& n) const {
  return o_.target.kind == Target::Kind::kCluster ||
         (o_.target.kind == Target::Kind::kNode && n.name() == o_.target.name);
}

// ---------------------------------------------------------------------------------------------
// Pods

std::optional<Finding> Diagnoser::pod_finding(const PodObj& p) {
  const auto req = gpu_request(p.v.spec);
  const sv phase = p.v.status.phase.value_or("");
  if (phase == "Succeeded") return std::nullopt;
  if (phase == "Failed" && *p.v.status.reason == "UnexpectedAdmissionError") return admission(p);
  if (phase == "Failed" && p.v.status.reason->starts_with("OutOf") && !p.v.spec.node_name->empty() && req) {
    return admission_out_of(p, *req);
  }
  if (phase == "Pending" && p.v.spec.node_name->empty()) {
    if (!p.v.spec.resource_claims.empty() && !req) return dra(p);
    if (req) return scheduling(p, *req);
    return std::nullopt;
  }
  if (auto f = runtime(p)) return f;
  return app(p, req);
}

std::vector<Finding> Diagnoser::run() {
  if (s_.nodes.empty()) {
    // A partial snapshot (pods of one namespace, no nodes): every fit question would answer
    // "0/0 nodes"; say what is missing once and skip the scheduler rules.
    Finding f;
    set_rule(f, RuleId::kSnapshotNoNodes);
    f.object = "cluster";
    f.summary = "snapshot has no nodes (collect with kgpu doctor --collect): scheduling is not diagnosed";
    f.fix.push_back("kgpu doctor --collect -o snapshot.json");
    add(std::move(f));
  }
  invalid_field_findings();
  if (o_.target.kind == Target::Kind::kCluster || o_.target.kind == Target::Kind::kNode) {
    for (const auto& n : s_.nodes) {
      if (in_scope_node(n) && !s_.has_invalid_fields(n.doc)) {
        node_findings(n);
        plugin_findings(n);
      }
    }
    driver_findings();
  }
  if (o_.target.kind == Target::Kind::kCluster || o_.target.kind == Target::Kind::kNamespace) spec_findings();
  const bool node_invalid = std::any_of(s_.nodes.begin(), s_.nodes.end(),
                                        [&](const NodeObj& n) { return s_.has_invalid_fields(n.doc); });
  for (const auto& p : s_.pods) {
    if (!in_scope_pod(p) || s_.has_invalid_fields(p.doc)) continue;
    // Fit answers over a node whose capacity could not be read would be wrong.
    if (node_invalid && p.v.status.phase.value_or("") == "Pending" && p.v.spec.node_name->empty()) continue;
    if (auto f = pod_finding(p)) {
      // A Pending pod whose only cause is the node's missing plugin names the node finding too.
      add(std::move(*f));
    }
  }
  pod_event_findings();
  if (o_.checklist && (o_.target.kind == Target::Kind::kCluster || o_.target.kind == Target::Kind::kNamespace)) {
    checklist();
  }
  sort_findings(out_);
  return std::move(out_);
}

}  // namespace kgpu::doctor::detail

namespace kgpu::doctor {

Result<std::vector<Finding>> diagnose(const Snapshot& snapshot, const Options& options) {
  const auto& t = options.target;
  if (t.kind == Target::Kind::kPod && snapshot.pod(t.ns, t.name) == nullptr) {
    return fail(ErrorCode::kNotFound, "pod {}/{} is not in the snapshot", t.ns, t.name);
  }
  if (t.kind == Target::Kind::kNode && snapshot.node(t.name) == nullptr) {
    return fail(ErrorCode::kNotFound, "node {} is not in the snapshot", t.name);
  }
  if (t.kind == Target::Kind::kNamespace) {
    bool found =
        std::any_of(snapshot.namespaces.begin(), snapshot.namespaces.end(),
                    [&](const auto& n) { return n.name() == t.ns; }) ||
        std::any_of(snapshot.pods.begin(), snapshot.pods.end(), [&](const auto& p) { return p.ns() == t.ns; }) ||
        std::any_of(snapshot.workloads.begin(), snapshot.workloads.end(),
                    [&](const auto& w) { return w.ns() == t.ns; }) ||
        // A partial snapshot (`kubectl get events`) knows the namespace from its events.
        std::any_of(snapshot.events.begin(), snapshot.events.end(),
                    [&](const auto& e) { return e.v.involved_object.namespace_ == t.ns; });
    if (!found) return fail(ErrorCode::kNotFound, "namespace {} is not in the snapshot", t.ns);
  }
  return detail::Diagnoser(snapshot, options).run();
}

}  // namespace kgpu::doctor
