#include "top/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include "k8s/api/json.h"
#include "apiclient/client.h"

namespace kgpu::top {

using nlohmann::json;

namespace {

const kube::Resource kQuotas{"", "v1", "resourcequotas", true, "ResourceQuota"};

using k8s::api::at;
using k8s::api::list;
using k8s::api::text;

std::optional<double> quantity(const json& v) {
  auto q = k8s::api::quantity(v);
  if (!q) return std::nullopt;
  return q->as_double();
}

}  // namespace

const k8s::api::NodeObject* Cluster::node(std::string_view name) const {
  for (const auto& n : nodes) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

QuotaInfo decode_quota(const json& quota) {
  QuotaInfo q;
  q.ns = text(quota, {"metadata", "namespace"});
  q.name = text(quota, {"metadata", "name"});
  auto read = [](const json& list, std::map<std::string, double>& out) {
    if (!list.is_object()) return;
    for (const auto& [k, v] : list.items()) {
      if (k.find("nvidia.com/") == std::string::npos) continue;
      if (auto x = quantity(v)) out[k] = *x;
    }
  };
  read(at(quota, {"spec", "hard"}), q.hard);
  read(at(quota, {"status", "used"}), q.used);
  return q;
}

AgentPod decode_agent(const json& pod, std::string_view port_name) {
  AgentPod a;
  a.ns = text(pod, {"metadata", "namespace"});
  a.name = text(pod, {"metadata", "name"});
  a.node = text(pod, {"spec", "nodeName"});
  a.phase = text(pod, {"status", "phase"});
  a.ip = text(pod, {"status", "podIP"});
  for (const auto& c : list(pod, {"spec", "containers"})) {
    for (const auto& p : list(c, {"ports"})) {
      const json& port = at(p, {"containerPort"});
      if (text(p, {"name"}) == port_name && port.is_number_integer() && a.port == 0) a.port = port.get<int>();
    }
  }
  for (const auto& c : list(pod, {"status", "conditions"}))
    if (text(c, {"type"}) == "Ready") a.ready = text(c, {"status"}) == "True";
  return a;
}

Result<Cluster> read_cluster(kube::Client& client, const ReadOptions& o) {
  Cluster c;
  kube::ListOptions lo;
  lo.label_selector = o.node_selector;
  auto nodes = client.list_all(kube::resources::kNodes, "", lo);
  if (!nodes) return std::unexpected(nodes.error().to_error().wrap("listing nodes"));
  std::vector<k8s::api::NodeObject> others;  // nodes without GPU resources: some may have DRA devices
  for (const auto& n : *nodes) {
    auto info = k8s::api::decode_node(n);
    if (!info) {
      c.warnings.push_back(info.error().message);
    } else if (info->is_gpu_node()) {
      c.nodes.push_back(std::move(*info));
    } else {
      others.push_back(std::move(*info));
    }
  }
  kube::ListOptions pods_options;
  pods_options.label_selector = o.pod_selector;
  auto pods = client.list_all(kube::resources::kPods, o.pod_namespace, pods_options);
  if (!pods) return std::unexpected(pods.error().to_error().wrap("listing pods"));
  for (const auto& p : *pods) {
    auto info = k8s::api::decode_pod(p);
    if (!info) {
      c.warnings.push_back(info.error().message);
      continue;
    }
    if (info->terminal() || (info->requests.empty() && info->claims.empty())) continue;
    c.pods.push_back(std::move(*info));
  }
  if (!o.queue_config.empty()) {
    // "[NAMESPACE/]NAME", as `kgpu scheduler --queue-config` (whose namespace defaults to its own).
    const auto slash = o.queue_config.find('/');
    const std::string ns = slash == std::string::npos ? "kgpu-system" : o.queue_config.substr(0, slash);
    const std::string name = slash == std::string::npos ? o.queue_config : o.queue_config.substr(slash + 1);
    auto cm = client.get(kube::resources::kConfigMaps, ns, name);
    if (cm) {
      const std::string source = fmt::format("ConfigMap {}/{} queues.yaml", ns, name);
      auto parsed = scheduler::queues::parse_config(k8s::api::text(*cm, {"data", "queues.yaml"}), source);
      if (parsed) {
        std::vector<const nlohmann::json*> ptrs;
        for (const auto& p : *pods) ptrs.push_back(&p);
        c.queue_usage = scheduler::queues::usage(*parsed, scheduler::queues::workloads_of(*parsed, ptrs));
        c.queues = std::move(*parsed);
      } else {
        c.warnings.push_back("queues not shown: " + parsed.error().message);
      }
    } else if (!cm.error().not_found()) {
      c.warnings.push_back(fmt::format("queues not shown: ConfigMap {}: {}", o.queue_config, cm.error().text()));
    }
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
        k8s::api::ClaimObject info = k8s::api::decode_claim(x);
        if (!info.devices.empty()) c.claims.push_back(std::move(info));
      }
    } else if (!claims.error().not_found()) {
      c.warnings.push_back("ResourceClaims not read: " + claims.error().text());
    }
    auto slices = client.list_all(kube::resources::kResourceSlices, "", {});
    if (slices) {
      for (const auto& x : *slices) {
        k8s::api::SliceObject info = k8s::api::decode_slice(x);
        if (!info.node.empty()) c.slices.push_back(std::move(info));
      }
    } else if (!slices.error().not_found()) {
      c.warnings.push_back("ResourceSlices not read: " + slices.error().text());
    }
  }
  // A node with DRA devices but no device-plugin resources is a GPU node too.
  for (auto& n : others)
    if (std::ranges::any_of(c.slices, [&](const k8s::api::SliceObject& s) { return s.node == n.name; }))
      c.nodes.push_back(std::move(n));
  std::ranges::sort(c.nodes, {}, &k8s::api::NodeObject::name);
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
