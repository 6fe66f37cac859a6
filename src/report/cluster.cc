#include "report/cluster.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/strings.h"
#include "common/timestamp.h"
#include "k8s/api/json.h"
#include "k8s/api/objects.h"
#include "apiclient/client.h"

namespace kgpu::cost {

using nlohmann::json;

namespace {

double epoch(const std::string& rfc3339) {
  const auto t = parse_rfc3339(rfc3339);
  if (!t) return 0;
  return std::chrono::duration<double>(t->time_since_epoch()).count();
}

}  // namespace

const char* work_kind_name(WorkKind k) {
  switch (k) {
    case WorkKind::kNotebook:
      return "notebook";
    case WorkKind::kJob:
      return "Job";
    case WorkKind::kOther:
      return "other";
  }
  return "?";
}

bool GpuPod::shared() const { return resource.ends_with(".shared"); }

std::string GpuPod::mig_profile() const {
  constexpr std::string_view kPrefix = "nvidia.com/mig-";
  return resource.starts_with(kPrefix) ? resource.substr(kPrefix.size()) : "";
}

const GpuNode* ClusterView::node(const std::string& name) const {
  const auto it = std::lower_bound(nodes.begin(), nodes.end(), name,
                                   [](const GpuNode& n, const std::string& k) { return n.name < k; });
  return it != nodes.end() && it->name == name ? &*it : nullptr;
}

ClusterView cluster_from_objects(const ClusterObjects& objects, const std::string& owner_label) {
  ClusterView view;
  view.warnings = objects.warnings;
  for (const auto& obj : objects.nodes) {
    auto n = k8s::api::decode_node(obj);
    if (!n) {
      view.warnings.push_back(n.error().message);
      continue;
    }
    GpuNode g;
    g.name = n->name;
    g.labels = n->labels;
    int64_t mig_units = 0, shared_units = 0;
    for (const auto& [k, v] : n->allocatable) {
      if (k.starts_with("nvidia.com/mig-")) mig_units += v;
      if (k.ends_with(".shared")) shared_units += v;
    }
    const int64_t whole = n->allocatable.contains("nvidia.com/gpu") ? n->allocatable.at("nvidia.com/gpu") : 0;
    g.cpu_milli = n->cpu_milli;
    g.memory_mib = n->memory_mib;
    g.model = g.labels.contains("nvidia.com/gpu.product") ? g.labels["nvidia.com/gpu.product"] : "";
    g.replicas = static_cast<int>(std::clamp<int64_t>(n->label_int("nvidia.com/gpu.replicas"), 1, 1024));
    g.gpu_memory_mib = n->label_int("nvidia.com/gpu.memory");
    int64_t count = n->label_int("nvidia.com/gpu.count");
    if (count <= 0) count = whole > 0 ? whole : shared_units / g.replicas;
    g.gpus = static_cast<int>(std::clamp<int64_t>(count, 0, 1024));
    g.mig = mig_units > 0;
    if (g.gpus == 0 && !g.mig) continue;
    for (const auto& t : n->view.taints)
      g.taints.push_back({std::string(t.key), std::string(t.value), std::string(t.effect)});
    g.unschedulable = n->unschedulable;
    view.nodes.push_back(std::move(g));
  }
  std::sort(view.nodes.begin(), view.nodes.end(), [](const auto& a, const auto& b) { return a.name < b.name; });

  // Controllers one level up: ReplicaSet -> Deployment, Job -> CronJob.
  std::map<std::string, std::pair<std::string, std::string>> parent;  // "ns/Kind/name" -> controller
  auto index = [&](const std::vector<json>& objs, const char* kind) {
    for (const auto& o : objs) {
      for (const auto& r : k8s::api::list(o, {"metadata", "ownerReferences"})) {
        if (!k8s::api::flag(r, {"controller"})) continue;
        parent[k8s::api::text(o, {"metadata", "namespace"}) + "/" + kind + "/" + k8s::api::text(o, {"metadata", "name"})] =
            {k8s::api::text(r, {"kind"}), k8s::api::text(r, {"name"})};
        break;
      }
    }
  };
  index(objects.replicasets, "ReplicaSet");
  index(objects.jobs, "Job");

  for (const auto& obj : objects.pods) {
    auto p = k8s::api::decode_pod(obj);
    if (!p) {
      view.warnings.push_back(p.error().message);
      continue;
    }
    if (!p->holds()) continue;
    GpuPod g;
    g.ns = p->ns;
    g.name = p->name;
    g.uid = p->uid;
    g.node = p->node;
    g.resource = p->gpu_resource();
    if (g.resource.empty()) continue;
    g.units = p->request(g.resource);
    g.cpu_milli = p->cpu_milli;
    g.memory_mib = p->memory_mib;
    if (!owner_label.empty() && p->labels.contains(owner_label)) g.owner = p->labels.at(owner_label);
    auto [kind, name] = std::pair(p->controller.kind, p->controller.name);
    if (kind == "ReplicaSet" || kind == "Job") {
      const auto it = parent.find(g.ns + "/" + kind + "/" + name);
      if (it != parent.end()) {
        if (kind == "Job") g.kind = WorkKind::kJob;
        std::tie(kind, name) = it->second;
      }
    }
    if (kind.empty()) {
      kind = "Pod";
      name = g.name;
    }
    if (kind == "Job" || kind == "CronJob") g.kind = WorkKind::kJob;
    g.workload = kind + "/" + name;
    const std::string app = p->labels.contains("app") ? p->labels.at("app") : "";
    const std::string what = ascii_lower(g.name + " " + app + " " + p->image);
    if (kind == "Notebook" || what.find("notebook") != std::string::npos || what.find("jupyter") != std::string::npos) {
      g.kind = WorkKind::kNotebook;
    }
    g.started = epoch(p->start_time.empty() ? p->creation : p->start_time);
    for (const auto& [k, v] : p->view.spec.node_selector) g.node_selector.emplace(k, v);
    for (const auto& t : p->view.spec.tolerations)
      g.tolerations.push_back({std::string(t.key), t.op.empty() ? "Equal" : std::string(t.op), std::string(t.value),
                               std::string(t.effect)});
    if (view.node(g.node) == nullptr) {
      view.warnings.push_back(fmt::format("pod {}/{} holds {} {} on node {}, which advertises no GPUs", g.ns, g.name,
                                          g.units, g.resource, g.node));
    }
    view.pods.push_back(std::move(g));
  }
  std::sort(view.pods.begin(), view.pods.end(),
            [](const auto& a, const auto& b) { return std::tie(a.ns, a.name) < std::tie(b.ns, b.name); });
  return view;
}

Result<ClusterObjects> read_cluster(kube::Client& client) {
  ClusterObjects out;
  kube::ListOptions o;
  o.limit = 500;
  auto nodes = client.list_all(kube::resources::kNodes, "", o);
  if (!nodes) return std::unexpected(nodes.error().to_error().wrap("listing nodes"));
  out.nodes = std::move(*nodes);
  auto pods = client.list_all(kube::resources::kPods, "", o);
  if (!pods) return std::unexpected(pods.error().to_error().wrap("listing pods"));
  out.pods = std::move(*pods);
  if (auto rs = client.list_all(kube::resources::kReplicaSets, "", o)) {
    out.replicasets = std::move(*rs);
  } else {
    out.warnings.push_back("listing ReplicaSets: " + rs.error().text() + " (workloads named by their ReplicaSet)");
  }
  if (auto jobs = client.list_all(kube::resources::kJobs, "", o)) {
    out.jobs = std::move(*jobs);
  } else {
    out.warnings.push_back("listing Jobs: " + jobs.error().text() + " (CronJobs not followed)");
  }
  return out;
}

}  // namespace kgpu::cost
