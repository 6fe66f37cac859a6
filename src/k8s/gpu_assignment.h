// The contract between `kgpu scheduler` and the node agent: which GPUs a pod's containers get, and
// what each node really has and uses. Both live in annotations (docs/scheduler.md):
//
// Pod, written by the scheduler in the Binding (so the node and the GPUs land in one write):
//   kgpu.io/gpu-resource    the device resource the assignment is for ("nvidia.com/gpu", "nvidia.com/gpu.shared")
//   kgpu.io/gpu-assignment  "<container>:<uuid>[,<uuid>...][;<container>:...]" — for every container
//                           that requests the resource, in spec order (init containers first), the
//                           physical GPUs it gets; a share names its one GPU
//   kgpu.io/bound-at        MicroTime of the bind: the agent serves pods bound to it in this order
// Pod, written by the agent when the kubelet allocated a container (merge patch):
//   kgpu.io/gpu-allocated   the same format: what the containers allocated so far really got
// Node, written by the agent:
//   kgpu.io/gpus            JSON NodeGpuReport: each GPU's identity, how it is advertised, its
//                           NVLink peers and the pods really using it (from PodResources)
//
// Parsers bound what they accept (length, counts, JSON depth) and name the field at fault.
// Thread safety: plain functions.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace kgpu::k8s {

inline constexpr const char* kAnnotationGpuResource = "kgpu.io/gpu-resource";
inline constexpr const char* kAnnotationGpuAssignment = "kgpu.io/gpu-assignment";
inline constexpr const char* kAnnotationBoundAt = "kgpu.io/bound-at";
inline constexpr const char* kAnnotationGpuAllocated = "kgpu.io/gpu-allocated";
inline constexpr const char* kAnnotationNodeGpus = "kgpu.io/gpus";

// Limits of what the parsers accept.
inline constexpr size_t kMaxAssignmentBytes = 16 * 1024;
inline constexpr size_t kMaxAssignmentContainers = 64;
inline constexpr size_t kMaxGpusPerContainer = 64;
inline constexpr size_t kMaxNodeReportBytes = 256 * 1024;  // the API's limit on all annotations
inline constexpr size_t kMaxReportGpus = 256;
inline constexpr size_t kMaxReportUsesPerGpu = 1024;

struct ContainerGpus {
  std::string container;
  std::vector<std::string> uuids;
  bool operator==(const ContainerGpus&) const = default;
};
using Assignment = std::vector<ContainerGpus>;

// "<container>:<uuid>,<uuid>;<container>:<uuid>"; containers without GPUs are left out.
std::string format_assignment(const Assignment& a);
// Errors (kInvalidArgument) name the entry: empty container name or uuid, a container twice, a
// uuid twice in one container, more than the limits above.
Result<Assignment> parse_assignment(std::string_view text);
// The entry for `container`, or nullptr.
const ContainerGpus* find_container(const Assignment& a, std::string_view container);

// One pod's use of one GPU, as the agent saw it.
struct GpuUse {
  std::string ns, pod, uid, container;
  int replicas = 1;  // of the GPU's `replicas`; a whole GPU: 1 of 1
  bool operator==(const GpuUse&) const = default;
};

struct ReportedGpu {
  int index = 0;
  std::string uuid;
  std::string model;
  uint64_t memory_mib = 0;
  bool healthy = true;
  std::string resource;  // how the kubelet sees it: "nvidia.com/gpu", "nvidia.com/gpu.shared"; "" = not advertised (MIG)
  int replicas = 1;      // kubelet devices per GPU under `resource` (time-slicing / MPS), 1 for whole
  std::vector<int> nvlink_peers;  // indices of GPUs reached over NVLink
  std::vector<GpuUse> used;
  bool operator==(const ReportedGpu&) const = default;
};

struct NodeGpuReport {
  std::string observed_at;  // MicroTime of the PodResources reading the `used` lists come from
  std::vector<ReportedGpu> gpus;
  bool operator==(const NodeGpuReport&) const = default;
};

std::string format_node_report(const NodeGpuReport& r);
// Errors name the field ("gpus[3].used[0].replicas: ...").
Result<NodeGpuReport> parse_node_report(std::string_view text);

}  // namespace kgpu::k8s
