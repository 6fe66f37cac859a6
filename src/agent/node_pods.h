// The pods of this node as the agent's writers see them (remediation, the MIG manager): which hold
// a device, and their eviction through the Eviction API (PodDisruptionBudgets are the API server's).
// Thread safety: plain functions; the client is thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "apiclient/client.h"
#include "common/error.h"
#include "health/remediation.h"

namespace kgpu::agent {

// Whether the pod's kgpu.io/gpu-allocated (what its containers got), else its
// kgpu.io/gpu-assignment, names one of `uuids` (GPU or MIG device UUIDs).
bool pod_uses_any(const nlohmann::json& pod, const std::vector<std::string>& uuids);
// Succeeded or Failed: it holds nothing any more.
bool pod_finished(const nlohmann::json& pod);
health::PodRef pod_ref(const nlohmann::json& pod);
std::string pod_names(const std::vector<health::PodRef>& pods);  // "ns/a, ns/b" (at most 8, then "and N more")

// POST pods/<name>/eviction (policy/v1) with the pod's UID as precondition: evicted, blocked (429:
// a PodDisruptionBudget; its message kept) or gone (404).
Result<health::Eviction> evict_pod(kube::Client& client, const health::PodRef& pod);

}  // namespace kgpu::agent
