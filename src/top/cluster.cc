#include "top/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "k8s/gpu_resources.h"
#include "k8s/quantity.h"
#include "kube/client.h"

namespace kgpu::top {

using nlohmann::json;

namespace {

const kube::Resource kQuotas{"", "v1", "resourcequotas", true, "ResourceQuota"};

std::string str(const json& o, const char* key) {
  if (!o.is_object()) return {};
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

const json& child(const json& o, const char* key) {
  static const json kNull;
  if (!o.is_object()) return kNull;
  const auto it = o.find(key);
  return it != o.end() ? *it : kNull;
}

std::map<std::string, std::string> string_map(const json& o) {
  std::map<std::string, std::string> out;
  if (!o.is_object()) return out;
  for (const auto& [k, v] : o.items()) {
    if (v.is_string()) out[k] = v.get<std::string>();
  }
  return out;
}

std::optional<double> quantity(const json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return std::nullopt;
  auto q = k8s::Quantity::parse(v.get<std::string>());
  if (!q) return std::nullopt;
  return q->as_double();
}

std::map<std::string, int64_t> gpu_resources(const json& list) {
  std::map<std::string, int64_t> out;
  if (!list.is_object()) return out;
  for (const auto& [k, v] : list.items()) {
    if (!k8s::is_gpu_device_resource(k)) continue;
    if (auto q = quantity(v)) out[k] = static_cast<int64_t>(*q);
  }
  return out;
}

}  // namespace

const NodeInfo* Cluster::node(std::string_view name) const {
  for (const auto& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

NodeInfo decode_node(const json& node) {
  NodeInfo n;
  const json& meta = child(node, "metadata");
  n.name = str(meta, "name");
  n.labels = string_map(child(meta, "labels"));
  const json& spec = child(node, "spec");
  n.unschedulable = spec.is_object() && spec.value("unschedulable", false);
  const json& status = child(node, "status");
  n.capacity = gpu_resources(child(status, "capacity"));
  n.allocatable = gpu_resources(child(status, "allocatable"));
  const json& conds = child(status, "conditions");
  if (conds.is_array()) {
    for (const auto& c : conds) {
      if (str(c, "type") == "Ready") n.ready = str(c, "status") == "True";
    }
  }
  if (const std::string* text = k8s::object_annotation(node, k8s::kAnnotationNodeGpus)) {
    if (auto r = k8s::parse_node_report(*text)) {
      n.report = std::move(*r);
    } else {
      n.report_error = r.error().message;
    }
  }
  return n;
}

PodInfo decode_pod(const json& pod) {
  PodInfo p;
  const json& meta = child(pod, "metadata");
  p.ns = str(meta, "namespace");
  p.name = str(meta, "name");
  p.uid = str(meta, "uid");
  p.labels = string_map(child(meta, "labels"));
  p.node = str(child(pod, "spec"), "nodeName");
  p.phase = str(child(pod, "status"), "phase");
  p.containers = k8s::pod_containers(pod);
  for (const auto& [r, n] : k8s::pod_requests(p.containers)) {
    if (k8s::is_gpu_device_resource(r)) p.requests[r] = n;
  }
  // Claims: a name the pod gives (spec.resourceClaims[].resourceClaimName) or one generated from a
  // template (status.resourceClaimStatuses[].resourceClaimName).
  for (const auto* list :
       {&child(child(pod, "spec"), "resourceClaims"), &child(child(pod, "status"), "resourceClaimStatuses")}) {
    if (!list->is_array()) continue;
    for (const auto& c : *list) {
      const std::string name = str(c, "resourceClaimName");
      if (!name.empty() && std::ranges::find(p.claims, name) == p.claims.end()) p.claims.push_back(name);
    }
  }
  return p;
}

QuotaInfo decode_quota(const json& quota) {
  QuotaInfo q;
  const json& meta = child(quota, "metadata");
  q.ns = str(meta, "namespace");
  q.name = str(meta, "name");
  auto read = [](const json& list, std::map<std::string, double>& out) {
    if (!list.is_object()) return;
    for (const auto& [k, v] : list.items()) {
      if (k.find("nvidia.com/") == std::string::npos) continue;
      if (auto x = quantity(v)) out[k] = *x;
    }
  };
  read(child(child(quota, "spec"), "hard"), q.hard);
  read(child(child(quota, "status"), "used"), q.used);
  return q;
}

ClaimInfo decode_claim(const json& claim) {
  ClaimInfo c;
  const json& meta = child(claim, "metadata");
  c.ns = str(meta, "namespace");
  c.name = str(meta, "name");
  const json& status = child(claim, "status");
  const json& results = child(child(child(status, "allocation"), "devices"), "results");
  if (results.is_array()) {
    for (const auto& r : results) c.devices.push_back({str(r, "driver"), str(r, "pool"), str(r, "device")});
  }
  const json& reserved = child(status, "reservedFor");
  if (reserved.is_array()) {
    for (const auto& r : reserved) {
      if (str(r, "resource") == "pods") c.reserved_for.push_back(str(r, "name"));
    }
  }
  return c;
}

SliceInfo decode_slice(const json& slice) {
  SliceInfo s;
  s.name = str(child(slice, "metadata"), "name");
  const json& spec = child(slice, "spec");
  s.driver = str(spec, "driver");
  s.pool = str(child(spec, "pool"), "name");
  s.node = str(spec, "nodeName");
  const json& devices = child(spec, "devices");
  if (devices.is_array()) {
    for (const auto& d : devices) {
      const json& taints = child(d, "taints");
      s.devices.push_back({str(d, "name"), taints.is_array() && !taints.empty()});
    }
  }
  return s;
}

AgentPod decode_agent(const json& pod, std::string_view port_name) {
  AgentPod a;
  const json& meta = child(pod, "metadata");
  a.ns = str(meta, "namespace");
  a.name = str(meta, "name");
  const json& spec = child(pod, "spec");
  a.node = str(spec, "nodeName");
  const json& status = child(pod, "status");
  a.phase = str(status, "phase");
  a.ip = str(status, "podIP");
  const json& containers = child(spec, "containers");
  if (containers.is_array()) {
    for (const auto& c : containers) {
      const json& ports = child(c, "ports");
      if (!ports.is_array()) continue;
      for (const auto& p : ports) {
        if (str(p, "name") == port_name && child(p, "containerPort").is_number_integer() && a.port == 0) {
          a.port = child(p, "containerPort").get<int>();
        }
      }
    }
  }
  const json& conds = child(status, "conditions");
  if (conds.is_array()) {
    for (const auto& c : conds) {
      if (str(c, "type") == "Ready") a.ready = str(c, "status") == "True";
    }
  }
  return a;
}

bool is_gpu_node(const NodeInfo& n) {
  if (n.report) return true;
  const auto present = n.labels.find("nvidia.com/gpu.present");
  if (present != n.labels.end() && present->second == "true") return true;
  for (const auto& [r, v] : n.capacity) {
    if (v > 0) return true;
  }
  const auto count = n.labels.find("nvidia.com/gpu.count");
  return count != n.labels.end() && !count->second.empty() && count->second != "0";
}

Result<Cluster> read_cluster(kube::Client& client, const ReadOptions& o) {
  Cluster c;
  kube::ListOptions lo;
  lo.label_selector = o.node_selector;
  auto nodes = client.list_all(kube::resources::kNodes, "", lo);
  if (!nodes) return std::unexpected(nodes.error().to_error().wrap("listing nodes"));
  for (const auto& n : *nodes) {
    NodeInfo info = decode_node(n);
    if (is_gpu_node(info)) c.nodes.push_back(std::move(info));
  }
  kube::ListOptions pods_options;
  pods_options.label_selector = o.pod_selector;
  auto pods = client.list_all(kube::resources::kPods, o.pod_namespace, pods_options);
  if (!pods) return std::unexpected(pods.error().to_error().wrap("listing pods"));
  for (const auto& p : *pods) {
    PodInfo info = decode_pod(p);
    if (info.terminal() || (info.requests.empty() && info.claims.empty())) continue;
    c.pods.push_back(std::move(info));
  }
  kube::ListOptions agents_options;
  agents_options.label_selector = o.agent_selector;
  auto agents = client.list_all(kube::resources::kPods, o.agent_namespace, agents_options);
  if (!agents) return std::unexpected(agents.error().to_error().wrap("listing the kgpu agent pods"));
  for (const auto& p : *agents) c.agents.push_back(decode_agent(p, o.agent_port_name));
  if (o.quotas) {
    auto quotas = client.list_all(kQuotas, o.pod_namespace, {});
    if (quotas) {
      for (const auto& q : *quotas) {
        QuotaInfo info = decode_quota(q);
        if (!info.hard.empty()) c.quotas.push_back(std::move(info));
      }
    } else {
      c.warnings.push_back("ResourceQuotas not read: " + quotas.error().text());
    }
  }
  if (o.dra) {
    auto claims = client.list_all(kube::resources::kResourceClaims, o.pod_namespace, {});
    if (claims) {
      for (const auto& x : *claims) {
        ClaimInfo info = decode_claim(x);
        if (!info.devices.empty()) c.claims.push_back(std::move(info));
      }
    } else if (!claims.error().not_found()) {
      c.warnings.push_back("ResourceClaims not read: " + claims.error().text());
    }
    auto slices = client.list_all(kube::resources::kResourceSlices, "", {});
    if (slices) {
      for (const auto& x : *slices) {
        SliceInfo info = decode_slice(x);
        if (!info.node.empty()) c.slices.push_back(std::move(info));
      }
    } else if (!slices.error().not_found()) {
      c.warnings.push_back("ResourceSlices not read: " + slices.error().text());
    }
  }
  // A node with DRA devices but no device-plugin resources is a GPU node too.
  if (!c.slices.empty()) {
    for (const auto& n : *nodes) {
      const std::string name = str(child(n, "metadata"), "name");
      if (c.node(name) != nullptr) continue;
      if (std::ranges::any_of(c.slices, [&](const SliceInfo& s) { return s.node == name; })) {
        c.nodes.push_back(decode_node(n));
      }
    }
  }
  std::ranges::sort(c.nodes, {}, &NodeInfo::name);
  return c;
}

namespace {

// The agent pod serving `node`: a running one first, then any.
const AgentPod* agent_for(const Cluster& c, const std::string& node) {
  const AgentPod* best = nullptr;
  for (const auto& a : c.agents) {
    if (a.node != node) continue;
    if (best == nullptr || (a.phase == "Running" && best->phase != "Running")) best = &a;
  }
  return best;
}

NodeSource fetch_one(kube::Client& client, const Cluster& cluster, const std::string& node, const FetchOptions& o) {
  NodeSource out;
  const AgentPod* a = agent_for(cluster, node);
  if (a == nullptr) {
    out.error = "no kgpu agent pod on this node";
    return out;
  }
  out.agent = a->ns + "/" + a->name;
  if (a->phase != "Running") {
    out.error = fmt::format("agent pod {} is {}", out.agent, a->phase.empty() ? "not running" : a->phase);
    return out;
  }
  if (a->port == 0) {
    out.error = fmt::format("agent pod {} declares no container port named metrics", out.agent);
    return out;
  }
  const std::string path = fmt::format("/api/v1/namespaces/{}/pods/{}:{}/proxy/metrics", a->ns, a->name, a->port);
  auto body = client.get_raw(path, o.limits.max_bytes + 1);  // one byte over: parse_exposition names the limit
  if (!body) {
    out.error = fmt::format("agent pod {} unreachable: {}", out.agent, body.error().text());
    return out;
  }
  auto samples = parse_exposition(*body, fmt::format("{} /metrics", out.agent), o.limits, wanted_metric);
  if (!samples) {
    out.error = samples.error().message;
    return out;
  }
  out.metrics = node_metrics(*samples);
  return out;
}

}  // namespace

std::map<std::string, NodeSource> fetch_node_metrics(kube::Client& client, const Cluster& cluster,
                                                     const std::vector<std::string>& nodes, const FetchOptions& o) {
  std::vector<NodeSource> results(nodes.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < nodes.size(); i = next++) results[i] = fetch_one(client, cluster, nodes[i], o);
  };
  const size_t threads = std::min<size_t>(std::max(1, o.concurrency), nodes.size());
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  std::map<std::string, NodeSource> out;
  for (size_t i = 0; i < nodes.size(); ++i) out[nodes[i]] = std::move(results[i]);
  return out;
}

}  // namespace kgpu::top
