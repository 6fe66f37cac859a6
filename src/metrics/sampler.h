// The exporter's background work: samples NVML every interval, polls the kubelet's PodResources
// on its own interval, follows XID events, and keeps one pre-rendered /metrics page.
//
// A scrape only copies a shared pointer to the latest page: it never calls NVML or the kubelet.
//
// Thread safety: page() and healthy() may be called from any thread at any time. start()/stop()
// from one thread. The Node must outlive the Sampler.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "gpu/node.h"
#include "kubelet/pod_resources.h"
#include "metrics/attribution.h"
#include "metrics/counters.h"
#include "metrics/frame.h"

namespace kgpu::metrics {

// A pod as the API server has it: the source of the pod_uid label and of pod labels.
struct PodInfo {
  std::string ns, name, uid;
  std::map<std::string, std::string> labels;
};

// dcgm-exporter's label name for a pod label: every character outside [a-zA-Z0-9_] becomes '_'
// (and a leading digit gets a '_' before it, which Prometheus requires).
std::string sanitize_label_name(std::string_view name);

struct SamplerOptions {
  std::chrono::milliseconds interval{5000};
  std::string hostname;
  std::vector<Counter> counters = default_counters();
  // PodResources: empty socket disables attribution to pods.
  std::string pod_resources_socket = kubelet::kDefaultPodResourcesSocket;
  std::chrono::milliseconds pod_resources_interval{10000};
  std::chrono::milliseconds pod_resources_timeout{2000};
  // Allocations stay on the series this long after the kubelet stops answering.
  std::chrono::milliseconds pod_resources_grace{60000};
  // Rewrites each PodResources reading before it is used (the agent's allocation table: the
  // devices containers really got). Called on the poll thread; null = as the kubelet reports.
  std::function<std::vector<kubelet::ContainerDevice>(const std::vector<kubelet::ContainerDevice>&)> translate;
  // DRA: the claim devices PodResources lists for driver `dra_driver` in pool `dra_pool` (the
  // node's name) are attributed as device-plugin devices are, found by device name among the
  // node's DRA devices (metrics::claim_devices; their resource label is the driver name). Empty
  // driver: claim devices are ignored.
  std::string dra_driver;
  std::string dra_pool;
  // Resources whose devices are GPUs; others in PodResources are ignored.
  std::vector<std::string> extra_resources;
  std::string proc_root = "/proc";
  std::string container_log_dir = "/var/log/containers";
  std::string pod_log_dir = "/var/log/pods";
  // Adds readings from another source to NVML's before each sample is rendered (DCGM's profiling
  // fields, src/gpu/dcgm); called on the sampling thread. Null: NVML only.
  std::function<void(std::vector<gpu::Telemetry>&)> enrich;
  // Time for intervals, staleness and timestamps (not owned; must outlive the Sampler).
  Clock* clock = &Clock::real();

  // dcgm-exporter's windows for DCGM_EXP_XID_ERRORS_COUNT and DCGM_EXP_CLOCK_EVENTS_COUNT.
  std::chrono::milliseconds xid_count_window{300000};
  std::chrono::milliseconds clock_events_count_window{300000};
  // Also the parent GPU's own series of a MIG-enabled GPU (dcgm-exporter has only the instances').
  bool mig_parent_series = false;
  LabelStyle style;
  // How PodResources names GPUs: "uid" (GPU-/MIG- UUIDs) or "device-name" (nvidia<N>, and
  // nvidia<N>/gi<M> for MIG, as on GKE); dcgm-exporter's DCGM_EXPORTER_KUBERNETES_GPU_ID_TYPE.
  std::string gpu_id_type = "uid";
  // dcgm-exporter's pod_uid label and pod labels on attributed series.
  bool pod_uid = false;
  bool pod_labels = false;
  std::vector<std::string> pod_label_allowlist;  // ECMAScript regexes on label names; empty = all
  // The pods of this node as the API server has them (the agent's informer); called once per
  // sample on the sampling thread; null = no API access (UIDs then come from the pod log directory).
  std::function<std::vector<PodInfo>()> pods;
};

class Sampler {
 public:
  Sampler(gpu::NodeGpus& node, SamplerOptions options);
  ~Sampler();

  // Takes the first sample synchronously (so the page is never empty), then starts the threads.
  void start();
  void stop();

  // The latest rendered page (never null after start() or sample_now()).
  std::shared_ptr<const std::string> page() const;
  // Liveness: a sample was completed within the last three intervals (plus a second), whatever
  // NVML answered. False means the sampling thread is stuck.
  bool healthy() const;
  // Readiness, from the latest sample: why NVML's view of the node is not whole ("NVML cannot list
  // the GPUs: ...", "GPU 3 (GPU-...) does not answer NVML"); empty when every GPU answers. A GPU
  // answers when gpu::answers() holds for its telemetry: the same rule the device plugin's health
  // probe applies (docs/metrics.md, "Up and healthy").
  std::vector<std::string> problems() const;

  // One sample now, on the caller's thread (tests; start() uses it too).
  void sample_now();
  // One PodResources poll now, on the caller's thread.
  void poll_pod_resources_now();

 private:
  // The steps of one sample (sample_now), in order. Only the sampling thread calls them.
  struct Holders;
  // Reads the inventory again when it is due or when NVML reports a device we do not know.
  void check_inventory(const std::vector<gpu::Telemetry>& ts);
  // The frame's shared inputs (PodResources allocations, XID counts, PodResources state).
  // The devices include this node's DRA claim devices (as device-plugin entries).
  Frame begin_frame(std::vector<kubelet::ContainerDevice>* devices);
  // Who holds which GPU / MIG instance; adds the frame's allocations.
  Holders find_holders(const std::vector<kubelet::ContainerDevice>& devices, Frame& f);
  // One DeviceSample per GPU / MIG instance NVML answered for (owner, XID, NVLink bandwidth);
  // then GPUs we know that NVML no longer reports, as down.
  void add_devices(std::vector<gpu::Telemetry> ts, const Holders& holders, Clock::SteadyTime now, Frame& f);
  // Per-container usage of GPUs shared between containers (NVML per-process data).
  void add_shared_usage(const Holders& holders, Clock::SteadyTime now, Frame& f);
  // The windowed XID and clock event counts, and the pods' UIDs and labels when asked for.
  void add_windows_and_pods(Clock::SteadyTime now, Frame& f);
  // Renders the page and the readiness problems, and makes them current.
  void publish(Frame f, const std::vector<gpu::CallError>& node_errors, Clock::SteadyTime started);

  void refresh_inventory();
  void on_event(const gpu::Event& e);
  bool is_gpu_resource(const std::string& resource) const;
  void sample_loop();
  void poll_loop();

  gpu::NodeGpus& node_;
  SamplerOptions opt_;
  Clock& clock_;
  kubelet::PodResourcesClient pod_resources_;
  ProcessResolver resolver_;

  // Sampling state: only the sampling thread (or sample_now's caller) touches these.
  std::string driver_version_;
  std::map<unsigned, DeviceIdentity> gpus_;                       // by index
  std::map<std::pair<unsigned, unsigned>, DeviceIdentity> migs_;  // (gpu, gi)
  std::map<std::string, unsigned> gpu_by_uuid_;
  std::map<std::string, std::pair<unsigned, unsigned>> mig_by_uuid_;
  struct NvlinkPrev {
    uint64_t kib;
    Clock::SteadyTime at;
  };
  std::map<unsigned, NvlinkPrev> nvlink_prev_;
  std::map<unsigned, uint64_t> process_util_seen_;  // gpu -> last NVML timestamp
  struct ProcUtil {
    unsigned sm;
    Clock::SteadyTime at;
  };
  std::map<std::pair<unsigned, unsigned>, ProcUtil> proc_util_;  // (gpu, pid)
  std::map<std::string, uint64_t> nvml_errors_;
  // Clock event reasons per sample, by GPU UUID, within the window.
  std::map<std::string, std::deque<std::pair<Clock::SteadyTime, uint64_t>>> clock_events_;
  std::vector<std::regex> allowlist_;
  uint64_t samples_ = 0;
  int samples_since_inventory_ = 0;
  Clock::SteadyTime last_unknown_refresh_{};
  std::vector<gpu::DraName> dra_devices_;  // the inventory's DRA device names (with dra_driver set)

  // Shared with the event and poll threads.
  mutable std::mutex mu_;
  // XID state by GPU UUID, so it stays with its GPU if indices change.
  std::map<std::string, uint64_t> last_xid_;
  std::map<std::pair<std::string, uint64_t>, uint64_t> xid_counts_;
  // XID events by GPU UUID within the window (at most kMaxWindowEvents each).
  std::map<std::string, std::deque<std::pair<Clock::SteadyTime, uint64_t>>> xid_window_;
  std::vector<kubelet::ContainerDevice> devices_;
  std::vector<kubelet::ContainerClaimDevice> claims_;
  Clock::SteadyTime down_since_{};  // when List started failing
  bool pod_resources_up_ = false;
  uint64_t pod_resources_errors_ = 0;
  std::shared_ptr<const std::string> page_;
  Clock::SteadyTime last_sample_{};
  std::vector<std::string> problems_;

  std::unique_ptr<gpu::EventWatcher> events_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;
  std::thread sample_thread_, poll_thread_;
};

}  // namespace kgpu::metrics
