// One sample of everything the exporter publishes, and its Prometheus text rendering.
//
// The sampler builds a Frame each collection interval; render() turns it into the text
// exposition format 0.0.4 with dcgm-exporter's metric names, HELP texts, label names and order,
// and value formats, followed by kgpu's own families (documented in docs/metrics.md).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpu/types.h"
#include "metrics/counters.h"

namespace kgpu::metrics {

struct PodRef {
  std::string ns, pod, container;
  auto operator<=>(const PodRef&) const = default;
};

// Who a device or process belongs to, and how it is labelled.
struct DeviceIdentity {
  unsigned gpu = 0;
  std::string uuid;  // the parent GPU's, also for MIG series
  std::string pci_bus_id;
  std::string model;
  std::optional<std::string> gi_profile;  // MIG series only
  std::optional<unsigned> gi_id;
};

struct DeviceSample {
  DeviceIdentity id;
  gpu::Telemetry telemetry;
  DeviceHistory history;
  std::optional<PodRef> owner;  // one container holds this GPU / MIG instance exclusively
  // A MIG-enabled GPU whose GPU instances carry its series (dcgm-exporter's shape): its own
  // DCGM series are left out unless Frame::mig_parent_series. kgpu's own families keep it.
  bool mig_parent = false;
};

// What the API server (or the kubelet's pod log directories) says about a pod, for
// dcgm-exporter's optional `pod_uid` label and pod labels.
struct PodMeta {
  std::string uid;                                          // empty: not known or not asked for
  std::vector<std::pair<std::string, std::string>> labels;  // sanitized names; empty unless asked for
};

// Label names and optional labels, as dcgm-exporter's flags select them.
struct LabelStyle {
  bool old_namespace = false;  // dcgm-exporter -o: uuid, pod_name, pod_namespace, container_name
  bool hostname = true;        // dcgm-exporter -n turns the Hostname label off
};

// A container's share of a GPU (time-slicing replicas, MPS), from NVML's per-process data.
struct ContainerUsage {
  PodRef pod;
  DeviceIdentity device;
  std::optional<double> sm_util_pct;  // sum over the container's processes; nullopt without samples
  uint64_t memory_mib = 0;
  unsigned processes = 0;
};

// A device handed to a container by the kubelet (from PodResources).
struct Allocation {
  PodRef pod;
  DeviceIdentity device;
  std::string resource;   // nvidia.com/gpu, nvidia.com/mig-1g.10gb, ...
  std::string device_id;  // GPU-..., GPU-...::3, MIG-...
};

struct AgentStats {
  uint64_t samples = 0;
  double last_sample_seconds = 0;
  double last_sample_unix = 0;
  std::map<std::string, uint64_t> nvml_errors;  // by call
  uint64_t pod_resources_errors = 0;
  bool pod_resources_up = false;
};

struct Frame {
  std::string hostname;
  std::string driver_version;
  std::vector<DeviceSample> devices;  // GPUs, then MIG devices
  std::vector<ContainerUsage> containers;
  std::vector<Allocation> allocations;
  // (gpu index, xid) -> events since the agent started; identities per gpu index.
  std::map<std::pair<unsigned, uint64_t>, uint64_t> xid_counts;
  std::map<unsigned, DeviceIdentity> gpu_identity;
  std::map<unsigned, bool> gpu_up;
  // DCGM_EXP_XID_ERRORS_COUNT / DCGM_EXP_CLOCK_EVENTS_COUNT: by GPU index, the XID events per code
  // and the samples per clock event reason bit within the last window_ms.
  std::map<unsigned, std::map<uint64_t, uint64_t>> xid_window;
  std::map<unsigned, std::map<uint64_t, uint64_t>> clock_event_window;
  long long xid_window_ms = 300000;
  long long clock_events_window_ms = 300000;
  bool mig_parent_series = false;
  LabelStyle style;
  std::map<std::pair<std::string, std::string>, PodMeta> pod_meta;  // by (namespace, pod)
  AgentStats stats;
};

// The text dcgm-exporter gives an XID in DCGM_FI_DEV_XID_ERRORS's err_msg label ("Unknown Error"
// beyond its table).
const char* xid_message(long long xid);

// The clock event reason name dcgm-exporter gives a bit in DCGM_EXP_CLOCK_EVENTS_COUNT's
// clock_event label, or nullptr for a bit it does not name.
const char* clock_event_name(uint64_t bit);

std::string render(const std::vector<Counter>& counters, const Frame& frame);

}  // namespace kgpu::metrics
