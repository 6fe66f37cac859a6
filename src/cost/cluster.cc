#include "cost/cluster.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/timestamp.h"
#include "k8s/quantity.h"
#include "kube/client.h"

namespace kgpu::cost {

using nlohmann::json;

namespace {

const json* at(const json& j, std::initializer_list<const char*> path) {
  const json* p = &j;
  for (const char* k : path) {
    if (!p->is_object()) return nullptr;
    const auto it = p->find(k);
    if (it == p->end()) return nullptr;
    p = &*it;
  }
  return p;
}

std::string str(const json& j, std::initializer_list<const char*> path) {
  const json* p = at(j, path);
  return p != nullptr && p->is_string() ? p->get<std::string>() : "";
}

std::map<std::string, std::string> string_map(const json* j) {
  std::map<std::string, std::string> out;
  if (j == nullptr || !j->is_object()) return out;
  for (const auto& [k, v] : j->items()) {
    if (v.is_string()) out.emplace(k, v.get<std::string>());
  }
  return out;
}

// A quantity's value rounded up; 0 for anything that does not parse.
int64_t quantity(const json* j, bool milli = false) {
  if (j == nullptr) return 0;
  std::string text;
  if (j->is_string()) {
    text = j->get<std::string>();
  } else if (j->is_number_integer()) {
    text = std::to_string(j->get<int64_t>());
  } else {
    return 0;
  }
  auto q = k8s::Quantity::parse(text);
  if (!q) return 0;
  return milli ? q->milli_value() : q->value();
}

int64_t label_int(const std::map<std::string, std::string>& labels, const char* key) {
  const auto it = labels.find(key);
  if (it == labels.end()) return 0;
  try {
    return std::stoll(it->second);
  } catch (const std::exception&) {
    return 0;
  }
}

bool is_gpu_resource(const std::string& r) {
  if (!r.starts_with("nvidia.com/")) return false;
  return r == "nvidia.com/gpu" || r.starts_with("nvidia.com/mig-") || r.ends_with(".shared") ||
         r.starts_with("nvidia.com/gpu.");
}

double epoch(const std::string& rfc3339) {
  const auto t = parse_rfc3339(rfc3339);
  if (!t) return 0;
  return std::chrono::duration<double>(t->time_since_epoch()).count();
}

// The controller owner reference of `obj`: {kind, name}, or empty.
std::pair<std::string, std::string> controller(const json& obj) {
  const json* refs = at(obj, {"metadata", "ownerReferences"});
  if (refs == nullptr || !refs->is_array()) return {};
  for (const auto& r : *refs) {
    const json* c = at(r, {"controller"});
    if (c != nullptr && c->is_boolean() && c->get<bool>()) return {str(r, {"kind"}), str(r, {"name"})};
  }
  return {};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
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
  for (const auto& n : objects.nodes) {
    GpuNode g;
    g.name = str(n, {"metadata", "name"});
    g.labels = string_map(at(n, {"metadata", "labels"}));
    const json* alloc = at(n, {"status", "allocatable"});
    int64_t whole = 0, mig_units = 0, shared_units = 0;
    if (alloc != nullptr && alloc->is_object()) {
      for (const auto& [k, v] : alloc->items()) {
        if (k == "nvidia.com/gpu") whole = quantity(&v);
        if (k.starts_with("nvidia.com/mig-")) mig_units += quantity(&v);
        if (k.starts_with("nvidia.com/") && k.ends_with(".shared")) shared_units += quantity(&v);
      }
      g.cpu_milli = quantity(at(*alloc, {"cpu"}), true);
      g.memory_mib = quantity(at(*alloc, {"memory"})) >> 20;
    }
    g.model = g.labels.contains("nvidia.com/gpu.product") ? g.labels["nvidia.com/gpu.product"] : "";
    g.replicas = static_cast<int>(std::clamp<int64_t>(label_int(g.labels, "nvidia.com/gpu.replicas"), 1, 1024));
    g.gpu_memory_mib = label_int(g.labels, "nvidia.com/gpu.memory");
    int64_t count = label_int(g.labels, "nvidia.com/gpu.count");
    if (count <= 0) count = whole > 0 ? whole : shared_units / g.replicas;
    g.gpus = static_cast<int>(std::clamp<int64_t>(count, 0, 1024));
    g.mig = mig_units > 0;
    if (g.gpus == 0 && !g.mig) continue;
    const json* taints = at(n, {"spec", "taints"});
    if (taints != nullptr && taints->is_array()) {
      for (const auto& t : *taints) g.taints.push_back({str(t, {"key"}), str(t, {"value"}), str(t, {"effect"})});
    }
    const json* u = at(n, {"spec", "unschedulable"});
    g.unschedulable = u != nullptr && u->is_boolean() && u->get<bool>();
    view.nodes.push_back(std::move(g));
  }
  std::sort(view.nodes.begin(), view.nodes.end(), [](const auto& a, const auto& b) { return a.name < b.name; });

  // Controllers one level up: ReplicaSet -> Deployment, Job -> CronJob.
  std::map<std::string, std::pair<std::string, std::string>> parent;  // "ns/Kind/name" -> controller
  auto index = [&](const std::vector<json>& objs, const char* kind) {
    for (const auto& o : objs) {
      const auto c = controller(o);
      if (!c.first.empty()) {
        parent[str(o, {"metadata", "namespace"}) + "/" + kind + "/" + str(o, {"metadata", "name"})] = c;
      }
    }
  };
  index(objects.replicasets, "ReplicaSet");
  index(objects.jobs, "Job");

  for (const auto& p : objects.pods) {
    const std::string phase = str(p, {"status", "phase"});
    const std::string node = str(p, {"spec", "nodeName"});
    if (node.empty() || phase == "Succeeded" || phase == "Failed") continue;
    GpuPod g;
    g.ns = str(p, {"metadata", "namespace"});
    g.name = str(p, {"metadata", "name"});
    g.uid = str(p, {"metadata", "uid"});
    g.node = node;
    const json* containers = at(p, {"spec", "containers"});
    std::string image;
    if (containers != nullptr && containers->is_array()) {
      for (const auto& c : *containers) {
        if (image.empty()) image = str(c, {"image"});
        const json* limits = at(c, {"resources", "limits"});
        const json* requests = at(c, {"resources", "requests"});
        const json* gpu_source = limits != nullptr && limits->is_object() ? limits : requests;
        if (gpu_source != nullptr && gpu_source->is_object()) {
          for (const auto& [k, v] : gpu_source->items()) {
            if (!is_gpu_resource(k)) continue;
            const int64_t n = quantity(&v);
            if (n <= 0) continue;
            if (g.resource.empty()) g.resource = k;
            if (k == g.resource) g.units += n;
          }
        }
        if (requests != nullptr) {
          g.cpu_milli += quantity(at(*requests, {"cpu"}), true);
          g.memory_mib += (quantity(at(*requests, {"memory"})) + (1 << 20) - 1) >> 20;
        }
      }
    }
    if (g.units <= 0) continue;
    const auto labels = string_map(at(p, {"metadata", "labels"}));
    if (!owner_label.empty() && labels.contains(owner_label)) g.owner = labels.at(owner_label);
    auto [kind, name] = controller(p);
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
    const std::string what = lower(g.name + " " + (labels.contains("app") ? labels.at("app") : "") + " " + image);
    if (kind == "Notebook" || what.find("notebook") != std::string::npos || what.find("jupyter") != std::string::npos) {
      g.kind = WorkKind::kNotebook;
    }
    std::string started = str(p, {"status", "startTime"});
    if (started.empty()) started = str(p, {"metadata", "creationTimestamp"});
    g.started = epoch(started);
    g.node_selector = string_map(at(p, {"spec", "nodeSelector"}));
    const json* tol = at(p, {"spec", "tolerations"});
    if (tol != nullptr && tol->is_array()) {
      for (const auto& t : *tol) {
        g.tolerations.push_back({str(t, {"key"}), str(t, {"operator"}), str(t, {"value"}), str(t, {"effect"})});
      }
    }
    if (view.node(node) == nullptr) {
      view.warnings.push_back(fmt::format("pod {}/{} holds {} {} on node {}, which advertises no GPUs", g.ns, g.name,
                                          g.units, g.resource, node));
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
