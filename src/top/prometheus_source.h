// The agents' metrics from a Prometheus server instead of the agents themselves (`kgpu top
// --prometheus URL`): one instant query for the series node_metrics() reads, grouped by node.
//
// Which node: the series' `Hostname` label (the agent's NODE_NAME), else `node` (the chart's
// ServiceMonitor relabels the target's node into it). Which workload: Prometheus keeps an agent
// series' own `pod`/`namespace`/`container` as `exported_pod`/... when they clash with the target's
// labels (honorLabels: false, the chart's setting); those win. A series without them whose
// `pod`/`namespace`/`container` are the scrape target's — it has the Prometheus Operator's
// `endpoint` label, or names a kgpu agent pod — names no workload.
//
// Thread safety: a pure function over a thread-safe client.
#pragma once

#include <string>
#include <vector>

#include "prom/client.h"
#include "top/views.h"

namespace kgpu::top {

struct PrometheusOptions {
  std::string selector = "job=\"kgpu-agent\"";  // label matchers added to the query ("" = none)
  double time = 0;                              // evaluation time, seconds since the epoch; 0: now
};

// The metrics of `nodes`; a node without series gets an error saying so. The query failing is an
// error for all (returned).
Result<Metrics> prometheus_metrics(const prom::Client& client, const Cluster& cluster,
                                   const std::vector<std::string>& nodes, const PrometheusOptions& options);

// The query prometheus_metrics() sends.
std::string prometheus_query(const PrometheusOptions& options);

}  // namespace kgpu::top
