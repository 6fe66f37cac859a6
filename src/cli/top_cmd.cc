#include "cli/top_cmd.h"

#include <fmt/format.h>

#include <iostream>

#include "common/files.h"
#include "common/strings.h"
#include "apiclient/client.h"
#include "apiclient/config.h"
#include "prom/client.h"
#include "top/cluster.h"
#include "top/prometheus_source.h"
#include "top/allocations.h"
#include "top/views.h"

namespace kgpu::cli {

namespace {

struct TopFlags {
  std::string kubeconfig, context;
  int request_timeout_s = 10;
  int concurrency = 16;
  std::string agent_namespace;
  std::string agent_selector = "app.kubernetes.io/name=kgpu-agent";
  std::string queue_config = "kgpu-system/kgpu-scheduler-queues";
  std::string selector;
  std::string ns;
  bool all_namespaces = false;
  bool containers = false;
  std::string sort_by;
  std::string output;
  std::string name;  // one node or pod
  std::string prometheus, prometheus_selector = "job=\"kgpu-agent\"", prometheus_token_file;
  double at = 0;
  CLI::App* top = nullptr;
  CLI::App* nodes = nullptr;
  CLI::App* pods = nullptr;
  CLI::App* namespaces = nullptr;
  CLI::App* allocations = nullptr;
};

TopFlags& top_flags() {
  static TopFlags f;
  return f;
}

int top_usage(std::string_view command, std::string_view message) {
  fmt::print(stderr, "kgpu {}: {}\n", command, message);
  return 2;
}

void add_api_options(CLI::App* cmd, TopFlags& f) {
  cmd->add_option("--kubeconfig", f.kubeconfig, "Kubeconfig file (default: $KUBECONFIG, ~/.kube/config, in-cluster)");
  cmd->add_option("--context", f.context, "Kubeconfig context");
  cmd->add_option("--queue-config", f.queue_config,
                  "The GPU quota queues' ConfigMap [NAMESPACE/]NAME (namespace kgpu-system when not given; docs/queues.md); "
                  "empty: no queue columns")
      ->capture_default_str();
  cmd->add_option("--request-timeout", f.request_timeout_s, "Seconds per API request (and per agent page)")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
}

void add_agent_options(CLI::App* cmd, TopFlags& f) {
  cmd->add_option("--agent-namespace", f.agent_namespace, "Namespace of the kgpu agent pods (default: all)");
  cmd->add_option("--agent-selector", f.agent_selector, "Label selector of the kgpu agent pods")->capture_default_str();
  cmd->add_option("--concurrency", f.concurrency, "Agent pages read at a time")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--prometheus", f.prometheus,
                  "Read the agents' series from this Prometheus (http(s)://host:port[/prefix]) instead of the agents");
  cmd->add_option("--prometheus-selector", f.prometheus_selector,
                  "Label matchers of the agents' series in Prometheus (\"\" for none)")
      ->capture_default_str();
  cmd->add_option("--prometheus-token-file", f.prometheus_token_file, "Bearer token for Prometheus, from this file");
  cmd->add_option("--at", f.at, "With --prometheus: the readings at this time (seconds since the epoch; default now)");
}

struct Api {
  std::unique_ptr<kube::Client> lists;  // retries as every kgpu client does
  std::unique_ptr<kube::Client> proxy;  // no retries: an unreachable agent is reported at once
  std::string default_namespace;
};

Result<Api> connect(const TopFlags& f) {
  kube::LoadOptions lo;
  lo.kubeconfig = f.kubeconfig;
  lo.context = f.context;
  auto config = kube::load_config(lo);
  if (!config) return std::unexpected(config.error());
  config->timeout = std::chrono::seconds(f.request_timeout_s);
  config->user_agent = "kgpu-top";
  Api api;
  api.default_namespace = config->namespace_.empty() ? "default" : config->namespace_;
  auto lists = kube::Client::create(*config);
  if (!lists) return std::unexpected(lists.error());
  // The agent pages: as many in flight as --concurrency allows, without client-side throttling
  // (API Priority and Fairness protects the server).
  kube::RestConfig proxy_config = *config;
  proxy_config.qps = 0;
  kube::ClientOptions po;
  po.max_retries = 0;
  auto proxy = kube::Client::create(proxy_config, po);
  if (!proxy) return std::unexpected(proxy.error());
  api.lists = std::move(*lists);
  api.proxy = std::move(*proxy);
  return api;
}

std::vector<std::string> gpu_node_names(const top::Cluster& c) {
  std::vector<std::string> names;
  for (const auto& n : c.nodes) names.push_back(n.name);
  return names;
}

void print_notes(const top::Cluster& c) {
  for (const auto& w : c.warnings) fmt::print(stderr, "warning: {}\n", w);
}

int run_top(const TopFlags& f) {
  const bool nodes = f.nodes->parsed(), pods = f.pods->parsed(), namespaces = f.namespaces->parsed();
  const std::string command = nodes ? "top nodes" : pods ? "top pods" : "top namespaces";
  if (!f.output.empty() && f.output != "wide" && f.output != "json") {
    return top_usage(command, "-o/--output: expected wide or json");
  }
  if (f.at != 0 && f.prometheus.empty()) return top_usage(command, "--at is for --prometheus");
  // --sort-by is checked before anything is read.
  {
    std::vector<top::NodeRow> n;
    std::vector<top::PodRow> p;
    std::vector<top::NamespaceRow> s;
    auto sorted = nodes  ? top::sort_nodes(n, f.sort_by)
                  : pods ? top::sort_pods(p, f.sort_by)
                         : top::sort_namespaces(s, f.sort_by);
    if (!sorted) return top_usage(command, sorted.error().message);
  }
  auto api = connect(f);
  if (!api) return top_usage(command, api.error().message);
  top::ReadOptions ro;
  ro.agent_namespace = f.agent_namespace;
  ro.agent_selector = f.agent_selector;
  ro.queue_config = namespaces ? f.queue_config : "";
  if (nodes) ro.node_selector = f.selector;
  if (pods) {
    ro.pod_namespace = f.all_namespaces ? "" : (f.ns.empty() ? api->default_namespace : f.ns);
    ro.pod_selector = f.selector;
  }
  if (namespaces) {
    ro.quotas = true;
    ro.pod_selector = f.selector;
  }
  auto cluster = top::read_cluster(*api->lists, ro);
  if (!cluster) {
    fmt::print(stderr, "kgpu {}: {}\n", command, cluster.error().message);
    return 1;
  }
  print_notes(*cluster);
  if (nodes && !f.name.empty()) {
    std::erase_if(cluster->nodes, [&](const k8s::api::NodeObject& n) { return n.name != f.name; });
    if (cluster->nodes.empty()) {
      fmt::print(stderr, "kgpu {}: node {} not found or has no GPUs\n", command, f.name);
      return 1;
    }
  }
  if (pods && !f.name.empty()) std::erase_if(cluster->pods, [&](const k8s::api::PodObject& p) { return p.name != f.name; });
  // Only the nodes the rows need.
  std::vector<std::string> wanted = gpu_node_names(*cluster);
  if (!nodes) {
    std::set<std::string> used;
    for (const auto& p : cluster->pods) {
      if (!p.node.empty()) used.insert(p.node);
    }
    std::erase_if(wanted, [&](const std::string& n) { return !used.contains(n); });
  }
  top::Metrics metrics;
  if (!f.prometheus.empty()) {
    prom::ClientOptions po;
    po.url = f.prometheus;
    po.timeout = std::chrono::seconds(f.request_timeout_s);
    if (!f.prometheus_token_file.empty()) {
      auto token = read_file_limited(f.prometheus_token_file, 64 << 10);
      if (!token) return top_usage(command, "--prometheus-token-file: " + token.error().message);
      po.bearer_token = trim(*token, " \t\r\n");
    }
    auto client = prom::Client::create(po);
    if (!client) return top_usage(command, client.error().message);
    top::PrometheusOptions o;
    o.selector = f.prometheus_selector;
    o.time = f.at;
    auto m = top::prometheus_metrics(**client, *cluster, wanted, o);
    if (!m) {
      fmt::print(stderr, "kgpu {}: {}\n", command, m.error().message);
      return 1;
    }
    metrics = std::move(*m);
  } else {
    top::FetchOptions fo;
    fo.concurrency = f.concurrency;
    metrics = top::fetch_node_metrics(*api->proxy, *cluster, wanted, fo);
  }
  size_t read = 0;
  for (const auto& [node, source] : metrics) {
    if (source.metrics) {
      ++read;
    } else {
      fmt::print(stderr, "node {}: no GPU metrics: {}\n", node, source.error);
    }
  }
  const bool json = f.output == "json";
  const bool wide = f.output == "wide";
  if (nodes) {
    auto rows = top::node_rows(*cluster, metrics);
    if (auto s = top::sort_nodes(rows, f.sort_by); !s) return top_usage(command, s.error().message);
    std::cout << (json ? top::to_json(rows).dump(2) + "\n" : top::nodes_table(rows, wide));
  } else if (pods) {
    auto rows = top::pod_rows(*cluster, metrics, f.containers);
    if (auto s = top::sort_pods(rows, f.sort_by); !s) return top_usage(command, s.error().message);
    if (json) {
      std::cout << top::to_json(rows).dump(2) << "\n";
    } else if (rows.empty()) {
      fmt::print(stderr, "No GPU pods found{}.\n",
                 f.all_namespaces ? "" : fmt::format(" in namespace {}", ro.pod_namespace));
    } else {
      std::cout << top::pods_table(rows, f.all_namespaces, f.containers, wide);
    }
  } else {
    auto rows = top::namespace_rows(*cluster, metrics);
    if (auto s = top::sort_namespaces(rows, f.sort_by); !s) return top_usage(command, s.error().message);
    std::cout << (json ? top::to_json(rows).dump(2) + "\n" : top::namespaces_table(rows));
  }
  // kubectl top's rule: no metrics at all is a failure; some nodes missing is shown and said.
  return !wanted.empty() && read == 0 ? 1 : 0;
}

int run_allocations(const TopFlags& f) {
  if (!f.output.empty() && f.output != "wide" && f.output != "json") {
    return top_usage("allocations", "-o/--output: expected wide or json");
  }
  auto api = connect(f);
  if (!api) return top_usage("allocations", api.error().message);
  top::ReadOptions ro;
  ro.node_selector = f.selector;
  ro.queue_config = f.queue_config;
  auto cluster = top::read_cluster(*api->lists, ro);
  if (!cluster) {
    fmt::print(stderr, "kgpu allocations: {}\n", cluster.error().message);
    return 1;
  }
  print_notes(*cluster);
  for (const auto& n : cluster->nodes) {
    if (!n.report_error.empty()) fmt::print(stderr, "node {}: kgpu.io/gpus: {}\n", n.name, n.report_error);
  }
  const auto a = top::allocations(*cluster);
  if (f.output == "json") {
    std::cout << top::to_json(a).dump(2) << "\n";
  } else {
    std::cout << top::allocations_text(a, f.output == "wide");
  }
  return 0;
}

}  // namespace

void add_top_commands(CLI::App& app) {
  auto& f = top_flags();
  f.top = app.add_subcommand("top", "GPU usage of nodes, pods and namespaces, like kubectl top (docs/top.md)");
  f.top->require_subcommand(1);
  const std::string sort_help = "Sort by: name or ";
  f.nodes =
      f.top->add_subcommand("nodes", "GPUs of each node: model, allocation, utilization, memory, temperature, power");
  f.nodes->alias("node");
  f.nodes->alias("no");
  f.nodes->add_option("name", f.name, "Only this node");
  f.nodes->add_option("-l,--selector", f.selector, "Label selector on nodes");
  f.nodes->add_option("--sort-by", f.sort_by,
                      sort_help + "util, gr-active, tensor, memory, temp, power, gpus, allocated");
  f.nodes->add_option("-o,--output", f.output, "wide (one line per GPU too) or json");
  f.pods = f.top->add_subcommand("pods", "The GPUs and shares each pod holds and how much of them it uses");
  f.pods->alias("pod");
  f.pods->alias("po");
  f.pods->add_option("name", f.name, "Only this pod");
  f.pods->add_option("-n,--namespace", f.ns, "Namespace (default: the kubeconfig context's)");
  f.pods->add_flag("-A,--all-namespaces", f.all_namespaces, "Pods of every namespace");
  f.pods->add_option("-l,--selector", f.selector, "Label selector on pods");
  f.pods->add_flag("--containers", f.containers, "One line per container");
  f.pods->add_option("--sort-by", f.sort_by, sort_help + "util, gr-active, tensor, memory, gpus");
  f.pods->add_option("-o,--output", f.output, "wide (with the node) or json");
  f.namespaces = f.top->add_subcommand("namespaces", "GPUs held and used per namespace, against its GPU quota");
  f.namespaces->alias("namespace");
  f.namespaces->alias("ns");
  f.namespaces->add_option("-l,--selector", f.selector, "Label selector on pods");
  f.namespaces->add_option("--sort-by", f.sort_by, sort_help + "util, memory, gpus, quota");
  f.namespaces->add_option("-o,--output", f.output, "json");
  for (auto* cmd : {f.nodes, f.pods, f.namespaces}) {
    add_api_options(cmd, f);
    add_agent_options(cmd, f);
  }
  f.allocations = app.add_subcommand(
      "allocations",
      "Every GPU resource per node and cluster-wide: allocatable, requested, holders, and what nobody can use");
  f.allocations->add_option("-l,--selector", f.selector, "Label selector on nodes");
  f.allocations->add_option("-o,--output", f.output, "wide (every holder) or json");
  add_api_options(f.allocations, f);
}

std::optional<int> run_top_commands() {
  auto& f = top_flags();
  if (f.top != nullptr && f.top->parsed()) return run_top(f);
  if (f.allocations != nullptr && f.allocations->parsed()) return run_allocations(f);
  return std::nullopt;
}

}  // namespace kgpu::cli
