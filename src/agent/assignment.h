// Which pod an Allocate is for: the agent's reading of the scheduler's assignment contract
// (k8s/gpu_assignment.h, docs/scheduler.md "The node honours the choice").
//
// The kubelet's Allocate names only device IDs, never the pod. The agent therefore matches it to
// the pods bound to this node: a candidate is a pod that is neither finished nor deleting, carries
// `kgpu.io/gpu-resource == R` and an assignment, and whose next container needing R (init
// containers, then containers, in spec order; minus those already allocated) requests exactly the
// n devices of this Allocate. The earliest `kgpu.io/bound-at` wins (ties: creationTimestamp, then
// namespace/name), which is the order the kubelet admits them in.
//
// Pure functions of pod JSON (no I/O). Thread safety: plain functions and values.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "k8s/api/objects.h"
#include "k8s/gpu_assignment.h"

namespace kgpu::agent {

// A container and what it asks of each extended resource (the read model, k8s/api/objects.h).
using PodContainer = k8s::api::ContainerResources;

struct PodInfo {
  std::string ns, name, uid;
  std::string creation;  // metadata.creationTimestamp as written
  std::string bound_at;  // kgpu.io/bound-at as written ("" when absent)
  std::string gpu_resource;  // kgpu.io/gpu-resource
  std::optional<k8s::Assignment> assignment;  // kgpu.io/gpu-assignment, when present and valid
  std::string assignment_error;               // why it is not valid ("" when fine or absent)
  k8s::Assignment allocated;                  // kgpu.io/gpu-allocated (empty when absent or invalid)
  bool done = false;                          // phase Succeeded/Failed, or deletionTimestamp set
  std::vector<PodContainer> containers;       // init containers first, each list in spec order
};

// Reads a pod object (k8s/api/objects.h). Malformed parts (a bad assignment, a request that is
// not a quantity) are recorded or skipped, never thrown: one odd pod must not stop the agent; an
// object that is not a pod at all yields a PodInfo with no containers.
PodInfo pod_info(const nlohmann::json& pod);

// (pod uid, container) pairs this agent already served.
using Served = std::set<std::pair<std::string, std::string>>;

// The first container of `pod` that requests `resource` and is neither in its gpu-allocated
// annotation nor in `served`; nullptr when none is left.
const PodContainer* next_container(const PodInfo& pod, const std::string& resource, const Served& served);

struct Candidate {
  const PodInfo* pod = nullptr;
  const PodContainer* container = nullptr;
};

// The candidate for an Allocate of `n` devices of `resource` (rules above), or nullopt. Pods
// without an assignment are not candidates; a pod whose assignment does not parse is (so that
// Allocate can refuse it with the parser's message).
std::optional<Candidate> choose_candidate(const std::vector<PodInfo>& pods, const std::string& resource, int64_t n,
                                          const Served& served);

// Orders two MicroTimes ("2026-12-01T18:00:00.123456Z") by the instant they name, fraction
// included; an unparsable or empty time sorts last.
bool earlier(const std::string& a, const std::string& b);

}  // namespace kgpu::agent
