// `kgpu doctor --collect` and live mode: reads the cluster through kgpu's API client (src/apiclient,
// configured as kubectl is: --kubeconfig, $KUBECONFIG, ~/.kube/config or the pod's service
// account, --context) and builds a snapshot, the one JSON file docs/doctor.md describes: a `List`
// of the cluster's objects, one SnapshotInfo item and one ContainerLog item per collected log.
//
// One paged list per kind across all namespaces; a kind that fails (RBAC forbids it, the API lacks
// it: CRDs and DRA kinds on older clusters) is recorded in SnapshotInfo.errors with the server's
// message and the rest is kept. ConfigMaps and Secrets are not collected: no rule reads them, and
// they may hold data nobody meant to ship in a snapshot. Logs (`tail` lines, and the previous
// container's after a restart) come through the pods/log subresource for the GPU stack pods
// (driver, toolkit, device plugin, validator with every init container, MIG manager, DCGM
// exporter, kgpu agent) and for failing GPU pods. Every request has a timeout, so a hung API
// server does not hang the collector.
#pragma once

#include <chrono>
#include <string>

#include "common/error.h"

namespace kgpu::doctor {

struct CollectOptions {
  std::string kubeconfig;  // --kubeconfig; empty: $KUBECONFIG, ~/.kube/config, in-cluster
  std::string context;     // --context; empty = current
  int tail = 200;          // log lines per container
  int max_app_logs = 50;   // failing GPU pods whose logs are collected
  std::string collected_at;  // RFC 3339; empty = now
  std::chrono::seconds request_timeout{60};
};

// The snapshot JSON text (invalid UTF-8 in logs replaced by U+FFFD). Fails when no configuration
// is found, or when every core kind fails (no cluster, no access at all).
Result<std::string> collect_snapshot(const CollectOptions& options);

}  // namespace kgpu::doctor
