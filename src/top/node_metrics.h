// One node's GPUs as its agent's metrics describe them: each GPU and MIG instance with its
// readings, what the kubelet allocated on it (kgpu_device_allocated) and, on shared GPUs, what each
// container uses (the per-container DCGM_FI_DEV_GPU_UTIL / DCGM_FI_DEV_FB_USED series), read from
// the samples of one /metrics page or of a Prometheus answer for that node.
//
// Label names are accepted in every spelling the samples can arrive with: dcgm-exporter's
// (`pod`, `namespace`, `container`, `UUID`), its 1.x names (`-o`: `pod_name`, `pod_namespace`,
// `container_name`, `uuid`) and Prometheus' renamed target clashes (`exported_pod`, ...).
//
// Thread safety: pure functions and plain values.
#pragma once

#include <compare>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "top/exposition.h"

namespace kgpu::top {

struct ContainerRef {
  std::string ns, pod, container;
  auto operator<=>(const ContainerRef&) const = default;
};

// A GPU (mig_id empty) or a MIG GPU instance.
struct Device {
  std::string key;    // "<UUID>" or "<UUID>/gi<id>"
  std::string uuid;   // the GPU's (a MIG instance's parent)
  std::string index;  // the `gpu` label
  std::string minor;  // from `device` ("nvidia3" -> "3")
  std::string model;
  std::string mig_profile, mig_id;
  std::optional<bool> up;               // kgpu_gpu_up (GPUs only)
  std::optional<double> util_pct;       // DCGM_FI_DEV_GPU_UTIL: a kernel was running, % of the time
  std::optional<double> gr_active;      // DCGM_FI_PROF_GR_ENGINE_ACTIVE, 0..1
  std::optional<double> tensor_active;  // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE, 0..1
  std::optional<double> fb_used_mib, fb_free_mib, fb_reserved_mib;
  std::optional<double> temp_c, power_w;
  std::optional<ContainerRef> owner;  // the one container its own series name (an exclusive holder)

  // used + free + reserved, when used and free are known.
  std::optional<double> fb_total_mib() const;
};

// One device ID the kubelet gave a container (a whole GPU, a MIG instance, or one replica).
struct Allocation {
  ContainerRef who;
  std::string device_key;
  std::string resource;
  std::string device_id;
  bool replica = false;  // "<UUID>::<n>": a time-slicing / MPS replica
};

// A container's own use of a shared GPU (from its processes).
struct ContainerUse {
  ContainerRef who;
  std::string device_key;
  std::optional<double> util_pct;
  std::optional<double> fb_used_mib;
  std::optional<double> processes;
};

struct NodeMetrics {
  std::map<std::string, Device> devices;  // by key
  std::vector<Allocation> allocations;
  std::vector<ContainerUse> uses;
  std::optional<double> last_sample_unix;  // kgpu_last_sample_timestamp_seconds
};

// The metric names node_metrics() reads, and a `keep` filter of them for parse_exposition.
const std::vector<std::string_view>& wanted_metric_names();
bool wanted_metric(std::string_view name);

// Builds the view from one node's samples. A GPU_UTIL / FB_USED series naming a container that
// kgpu_container_gpu_processes lists on the same device is that container's share; any other
// series is the device's own (carrying its exclusive holder's labels, if any).
NodeMetrics node_metrics(const std::vector<Sample>& samples);

}  // namespace kgpu::top
