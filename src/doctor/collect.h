// `kgpu doctor --collect`: runs kubectl (never a shell) and builds a snapshot, the one JSON file
// docs/doctor.md describes: a kubectl `List` of the cluster's objects, one SnapshotInfo item and
// one ContainerLog item per collected log.
//
// Commands (each with --request-timeout, so a hung API server does not hang the collector): one
// `kubectl get <core kinds> -A -o json`, and when that fails (RBAC forbids one kind), one `get` per
// core kind; one `get <kind> -A -o json` per optional kind (CRDs and DRA kinds, which fail where
// the API lacks them). Kinds that fail are recorded in SnapshotInfo.errors. ConfigMaps are not
// collected: no rule reads them, and they may hold data nobody meant to ship in a snapshot;
// `kubectl logs --tail=N` (and `--previous` after a restart) of the GPU stack pods (driver,
// toolkit, device plugin, validator with every init container, MIG manager, DCGM exporter, kgpu
// agent) and of failing GPU pods.
#pragma once

#include <string>
#include <vector>

#include "common/error.h"

namespace kgpu::doctor {

struct CollectOptions {
  std::string kubectl = "kubectl";      // path or name looked up on PATH
  std::string context;                  // --context; empty = current
  int tail = 200;                       // log lines per container
  int max_app_logs = 50;                // failing GPU pods whose logs are collected
  std::string collected_at;             // RFC 3339; empty = now
  std::string request_timeout = "60s";  // kubectl --request-timeout; empty = kubectl's default
};

// Runs argv (argv[0] looked up on PATH) and returns its stdout; fails with kUnavailable (exit status
// and the first lines of stderr) when it cannot start or exits non-zero.
Result<std::string> run_capture(const std::vector<std::string>& argv);

// The snapshot JSON text (invalid UTF-8 in logs replaced by U+FFFD). Fails only when kubectl
// cannot run or every core kind fails (no cluster, no access at all).
Result<std::string> collect_snapshot(const CollectOptions& options);

}  // namespace kgpu::doctor
