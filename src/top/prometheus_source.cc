#include "top/prometheus_source.h"

#include <fmt/format.h>

#include <set>

namespace kgpu::top {

std::string prometheus_query(const PrometheusOptions& o) {
  std::string names;
  for (auto n : wanted_metric_names()) names += (names.empty() ? "" : "|") + std::string(n);
  return fmt::format("{{__name__=~\"{}\"{}{}}}", names, o.selector.empty() ? "" : ",", o.selector);
}

Result<Metrics> prometheus_metrics(const prom::Client& client, const Cluster& cluster,
                                   const std::vector<std::string>& nodes, const PrometheusOptions& o) {
  const std::string query = prometheus_query(o);
  auto answer = client.query(query, o.time);
  if (!answer) return std::unexpected(answer.error());
  std::set<std::pair<std::string, std::string>> agents;  // (namespace, pod)
  for (const auto& a : cluster.agents) agents.insert({a.ns, a.name});
  std::map<std::string, std::vector<Sample>> by_node;
  for (const auto& s : answer->series) {
    if (s.samples.empty()) continue;
    std::string node = s.label("Hostname");
    if (node.empty()) node = s.label("node");
    if (node.empty()) continue;
    Sample out;
    out.name = s.label("__name__");
    out.value = s.samples.back().v;
    const bool exported = !s.label("exported_pod").empty();
    const bool target_pod = s.labels.contains("endpoint") || agents.contains({s.label("namespace"), s.label("pod")});
    for (const auto& [k, v] : s.labels) {
      if (k == "__name__") continue;
      const bool workload = k == "pod" || k == "namespace" || k == "container";
      if (workload && (exported || target_pod)) continue;  // the scrape target's, not the series'
      if (k.starts_with("exported_") &&
          (k == "exported_pod" || k == "exported_namespace" || k == "exported_container")) {
        out.labels.emplace_back(k.substr(9), v);
        continue;
      }
      out.labels.emplace_back(k, v);
    }
    by_node[node].push_back(std::move(out));
  }
  Metrics m;
  for (const auto& n : nodes) {
    NodeSource& src = m[n];
    src.agent = "prometheus";
    const auto it = by_node.find(n);
    if (it == by_node.end()) {
      src.error = fmt::format("Prometheus has no series of this node (Hostname or node label) for {}", query);
      continue;
    }
    src.metrics = node_metrics(it->second);
  }
  return m;
}

}  // namespace kgpu::top
