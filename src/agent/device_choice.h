// Which devices a container really gets, given what the kubelet passed, what the scheduler
// assigned and what is really in use (docs/scheduler.md, "The node honours the choice"); the MPS
// limits of a share; and the node report built from the same facts.
//
// Pure functions of the plan, the table's holdings and the pod (no I/O, no locks).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "agent/allocation_table.h"
#include "agent/assignment.h"
#include "common/error.h"
#include "gpu/types.h"
#include "k8s/gpu_assignment.h"
#include "sharing/allocate.h"
#include "sharing/plan.h"

namespace kgpu::agent {

// Device ID -> who holds it ("pod ns/name container c"), from AllocationTable::holdings(). With
// `reusing`, the devices of that pod's init containers (not sidecars) are left out: they have
// finished before its next container starts, and the kubelet and the scheduler let that container
// reuse them.
using InUse = std::map<std::string, std::string>;
InUse in_use(const std::vector<AllocationTable::Holding>& holdings, const PodInfo* reusing = nullptr);

// Adds to `used` the devices of `resource` that the scheduler assigned to containers of `pods`
// not served yet (bound, not admitted): whole GPUs themselves, and for a share as many of the GPU's
// replicas, not already in `used`, as the container requests. A pod no assignment speaks for
// (unassigned_devices) must not take them, or the assigned pod would be refused when it comes.
void reserve_assigned(const sharing::PlannedResource& resource, const std::vector<PodInfo>& pods,
                      const Served& served, InUse& used);

// Health of a physical device by UUID (GPU-... or MIG-...).
using HealthyFn = std::function<bool(const std::string& uuid)>;

// The device IDs of `resource` for `container` of an assigned pod, which requests `n`: the
// assigned GPUs themselves (whole GPUs), or `n` free replicas of the one assigned GPU (a share).
// Refused (kUnavailable for a GPU in use or unhealthy, kInvalidArgument otherwise) with
// "cannot honour the assignment: pod <ns>/<name> container <c>: ..." naming the GPU: unknown on
// this node, not advertised under the resource, unhealthy, already in use (and by whom), too few
// replicas left; or an assignment that does not parse, lacks the container or has the wrong count.
Result<std::vector<std::string>> assigned_devices(const sharing::Plan& plan, const sharing::PlannedResource& resource,
                                                  const PodInfo& pod, const PodContainer& container, int64_t n,
                                                  const HealthyFn& healthy, const InUse& used);

// For a container no assignment speaks for: the kubelet's IDs when none is really in use, else
// as many free, healthy devices of `resource` as it asked for, keeping the kubelet's free ones
// and choosing the rest as GetPreferredAllocation does (NVLink first). Refused (kUnavailable)
// when not enough are free. A device is never given twice.
Result<std::vector<std::string>> unassigned_devices(const sharing::PlannedResource& resource,
                                                    const std::vector<std::string>& kubelet_ids,
                                                    const std::vector<std::vector<gpu::Link>>& topology,
                                                    sharing::SharedPolicy policy, const HealthyFn& healthy,
                                                    const InUse& used);

// The per-client MPS limits of a container holding `k` of a GPU's `replicas` replicas:
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE = 100k/R and CUDA_MPS_PINNED_DEVICE_MEM_LIMIT =
// "0=<k*memory/R>M". The device is named by its ordinal as the client enumerates it: the
// container sees its one GPU as device 0 (NVIDIA's MPS documentation, appendix "Environment
// Variables", CUDA_MPS_PINNED_DEVICE_MEM_LIMIT takes "<device>=<limit>" pairs; NVIDIA's device
// plugin names the device by index since v0.15.0 because limits keyed by UUID were not applied).
std::map<std::string, std::string> mps_client_limits(int k, int replicas, uint64_t memory_mib);

// The node report: every GPU of the inventory with its plan (resource, replicas), health, NVLink
// peers and the holdings on it.
k8s::NodeGpuReport node_report(const gpu::Inventory& inventory, const sharing::Plan& plan, const HealthyFn& healthy,
                               const std::vector<AllocationTable::Holding>& holdings, std::string observed_at);

}  // namespace kgpu::agent
