// The agent's GPU remediation (docs/remediation.md): classifies every fault of this node's GPUs
// (XID events from the device plugin's watcher, and its own probe of the other signals) with the
// fault action table, keeps the node's conditions (GpuResetRequired, GpuRebootRequired,
// GpuNeedsAttention) and Events, and, when remediation is on, drives health::Remediator through the
// API (evictions, cordon, the cluster budget ConfigMap), NVML (reset) and the device plugin
// (withhold / release).
//
// Records live in the node annotation kgpu.io/remediation (JSON, written before each step acts), so
// a restarted agent resumes. With the API unreachable the agent keeps serving: faults are still
// classified, the devices withheld, and the writes (annotation, conditions) are retried every round
// until they land; Events go through the recorder's bounded queue.
//
// Conditions are written once something is out of service, and kept (False) afterwards; a node
// that never had a fault gets no write.
//
// Thread safety: start()/stop() from one thread; on_fault() from any thread (it queues);
// metrics_text() from any thread. One worker thread does everything else.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "agent/cluster_view.h"
#include "apiclient/client.h"
#include "apiclient/events.h"
#include "common/clock.h"
#include "gpu/node.h"
#include "gpu/types.h"
#include "health/fault_actions.h"
#include "health/remediation.h"

namespace kgpu::agent {

class DevicePluginManager;

inline constexpr const char* kAnnotationRemediation = "kgpu.io/remediation";
inline constexpr const char* kBudgetConfigMap = "kgpu-remediation";
// Set by an operator ("<uuid>[,<uuid>...]"): those quarantined or needs-operator GPUs are validated
// and returned; the agent removes the annotation once read.
inline constexpr const char* kAnnotationRemediationRelease = "kgpu.io/remediation-release";

struct RemediationOptions {
  health::Policy policy;
  std::string fault_actions_file;  // "" = the built-in table
  // The cluster budget: ConfigMap kgpu-remediation in `budget_namespace` (the agent's namespace
  // when empty); its data key maxUnavailable wins over `max_unavailable` (GPUs under remediation
  // at once, cluster-wide).
  std::string budget_namespace;
  int max_unavailable = 1;
  std::chrono::milliseconds interval{1000};        // one round: queued faults, a step, the writes
  std::chrono::milliseconds probe_interval{5000};  // the signal probe of every GPU
  std::string boot_id_file = "/proc/sys/kernel/random/boot_id";
  // Where the device plugins write the CDI spec ("" = not checked by the validation).
  std::string cdi_root;
  Clock* clock = &Clock::real();
};

class RemediationService {
 public:
  // `client` and `view` (not owned) must outlive the service; `plugins` too (the GPUs it withholds).
  // Errors: a fault action file that does not load (file:line: field).
  static Result<std::unique_ptr<RemediationService>> create(gpu::NodeGpus& node, DevicePluginManager& plugins,
                                                            kube::Client& client, ClusterView& view,
                                                            RemediationOptions options);
  ~RemediationService();

  void start();
  void stop();
  // From the NVML event thread: queues the event for the worker.
  void on_fault(const gpu::Event& e);
  // kgpu_remediation_* families (docs/remediation.md).
  std::string metrics_text() const;

 private:
  class Host;
  RemediationService(gpu::NodeGpus& node, DevicePluginManager& plugins, kube::Client& client, ClusterView& view,
                     RemediationOptions options, health::FaultActions table);
  void run();
  void round();
  void probe_signals();
  void handle(const std::string& uuid, unsigned index, const health::Verdict& v, const std::string& source);
  bool restore();
  void operator_releases();
  bool publish();
  std::map<std::string, unsigned> gpu_indexes();  // uuid -> index, from NVML now

  gpu::NodeGpus& node_;
  DevicePluginManager& plugins_;
  kube::Client& client_;
  ClusterView& view_;
  RemediationOptions opt_;
  Clock& clock_;
  health::FaultActions table_;
  health::Classifier classifier_;
  std::unique_ptr<Host> host_;
  std::unique_ptr<health::Remediator> remediator_;
  std::unique_ptr<kube::EventRecorder> events_;

  // Worker state.
  bool restored_ = false;
  bool dirty_ = false;          // records or conditions to write
  bool conditions_on_ = false;  // a kgpu condition is (or was) on the node: keep writing them
  std::string node_uid_;
  std::map<std::string, std::pair<std::string, std::string>> transitions_;  // type -> (status, lastTransitionTime)
  std::map<std::string, health::GpuRecord> published_;
  std::map<std::string, std::map<std::string, bool>> signal_state_;  // uuid -> signal -> on
  Clock::SteadyTime next_probe_{}, next_release_check_{};

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<gpu::Event> queue_;  // guarded by mu_; bounded
  bool stopping_ = false;
  std::map<std::string, uint64_t> faults_by_action_;  // guarded by mu_
  std::map<std::string, std::pair<unsigned, std::string>> phases_;  // uuid -> (index, phase), guarded by mu_
  uint64_t write_failures_ = 0;                                     // guarded by mu_
  std::thread thread_;
};

}  // namespace kgpu::agent
