// GPU usage over a time window from Prometheus: per device a pod held, its mean utilization,
// hours held and idle, peak framebuffer memory and the last time it was active, from the agent's
// dcgm-exporter-compatible series (docs/metrics.md).
//
// Activity is DCGM_FI_DEV_GPU_UTIL (%), or 100 x DCGM_FI_PROF_GR_ENGINE_ACTIVE where a series has
// no GPU_UTIL (MIG instances). Every window figure is computed by Prometheus over a subquery at
// `step` resolution, so one query answers for the whole cluster whatever the window:
//
//   held samples   count_over_time(U[W:S])          idle samples  count_over_time((U < T)[W:S])
//   mean           avg_over_time(U[W:S])            last active   max_over_time(timestamp(U >= T)[W:S])
//   first seen     min_over_time(timestamp(U)[W:S]) peak memory   max_over_time(DCGM_FI_DEV_FB_USED[W])
//   memory size    max_over_time((FB_USED + FB_FREE)[W:S])
//
// Pod labels: `exported_namespace`/`exported_pod`/`exported_container` when Prometheus renamed
// them (Kubernetes service discovery attached its own), else `namespace`/`pod`/`container`.
// Series without a pod (a whole shared GPU, an idle GPU) are kept as devices for memory sizes.
//
// Thread safety: plain values; collect_usage makes its queries one after another.
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "common/error.h"

namespace kgpu::prom {
class Client;
}

namespace kgpu::cost {

struct UsageOptions {
  double until = 0;  // end of the window, seconds since the epoch (> 0)
  double window_s = 7 * 86400;
  double step_s = 300;
  double idle_threshold = 5;  // % below which a sample counts as idle
};

// One device (a GPU, or a MIG instance) as seen by one container of a pod.
struct DeviceUsage {
  std::string ns, pod, container;  // empty for a device without a pod
  std::string node, uuid, gpu, model, mig_profile, mig_id;
  int held_samples = 0, idle_samples = 0;
  double mean_util = 0;      // %, over the held samples
  double last_active = 0;    // seconds since the epoch; 0: never active in the window
  double first_seen = 0;     // seconds since the epoch
  double peak_fb_mib = -1;   // -1: no FB_USED series
  double fb_total_mib = -1;  // FB_USED + FB_FREE; -1: unknown
};

struct Usage {
  UsageOptions options;
  std::vector<DeviceUsage> devices;  // sorted by (ns, pod, container, node, uuid, mig_id)
  std::vector<std::string> warnings;
  // The memory size of the device (node, uuid, mig_id) from any series that carries it, or -1.
  double device_memory(const std::string& node, const std::string& uuid, const std::string& mig_id) const;
  std::map<std::tuple<std::string, std::string, std::string>, double> memory_by_device;
};

// The PromQL of each figure for `o` (exposed for docs and tests).
struct UsageQueries {
  std::string held, idle, mean, last_active, first_seen, peak_memory, memory_size;
};
UsageQueries usage_queries(const UsageOptions& o);

Result<Usage> collect_usage(const prom::Client& client, const UsageOptions& options);

}  // namespace kgpu::cost
