// `kgpu agent` as NVIDIA's MIG Manager (docs/mig.md): the node label nvidia.com/mig.config names a
// config of a mig-parted v1 file (or of the built-in default names); the agent applies it and
// reports nvidia.com/mig.config.state = pending -> success | failed.
//
// What differs from NVIDIA's manager, on purpose:
// - only the GPUs whose layout differs are changed; the others, and their pods, are untouched; a
//   label naming the layout already there changes nothing (no pause, no eviction);
// - before a GPU changes it is withheld from the kubelet and its pods (those whose assignment names
//   the GPU or one of its MIG devices) must leave within `drain_timeout`, or, with `evict`, are
//   evicted (PodDisruptionBudgets honoured); a timeout fails the change with the pods named and
//   nothing changed;
// - the gates of the other operands (nvidia.com/gpu.deploy.dcgm, .nvsm, .client) that are "true"
//   are set to paused-for-mig-change while a change runs and are ALWAYS restored: on success,
//   failure and timeout, and by a restarted agent that finds them paused (recorded in
//   kgpu.io/mig-manager); the agent's own gates (device-plugin, gpu-feature-discovery,
//   dcgm-exporter) are not paused: its DaemonSet would leave the node mid-change;
// - a failure names its reason in the node annotation kgpu.io/mig-config-error and a Warning Event;
//   a GPU that fails midway is rolled back to its previous layout (gpu/mig_manage.h).
// The device plugins, labels, DRA slices and metrics follow the new layout through the agent's
// layout watch (no restart). One change at a time per node: a flock on `lock_file`, which
// `kgpu mig apply` on the same host honours too.
//
// Thread safety: start()/stop() from one thread; one worker thread does the rest.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include "agent/cluster_view.h"
#include "apiclient/client.h"
#include "apiclient/events.h"
#include "common/clock.h"
#include "gpu/node.h"

namespace kgpu::agent {

class DevicePluginManager;

inline constexpr const char* kMigConfigLabel = "nvidia.com/mig.config";
inline constexpr const char* kMigStateLabel = "nvidia.com/mig.config.state";
inline constexpr const char* kAnnotationMigError = "kgpu.io/mig-config-error";
inline constexpr const char* kAnnotationMigManager = "kgpu.io/mig-manager";
inline constexpr const char* kPausedForMigChange = "paused-for-mig-change";

struct MigManagerOptions {
  std::string config_file;  // mig-parted v1, re-read for every change; "" = the built-in default names
  bool evict = false;       // evict the pods of a GPU to change (else wait for them to leave)
  std::chrono::milliseconds drain_timeout{std::chrono::minutes(5)};
  // How often the node informer's labels are looked at (the Node itself is read only when the
  // label names a config not handled yet).
  std::chrono::milliseconds interval{500};
  std::string lock_file = "/run/kgpu-mig.lock";
  Clock* clock = &Clock::real();
};

class MigManager {
 public:
  // All references (not owned) must outlive the manager.
  MigManager(gpu::NodeGpus& node, DevicePluginManager& plugins, kube::Client& client, ClusterView& view,
             MigManagerOptions options);
  ~MigManager();
  void start();
  void stop();

 private:
  void run();
  void round();
  void change(const std::string& name, const nlohmann::json& node);
  void finish(const std::string& state, const std::string& error);
  bool patch_labels(const nlohmann::json& labels);
  void restore_operands();

  gpu::NodeGpus& node_;
  DevicePluginManager& plugins_;
  kube::Client& client_;
  ClusterView& view_;
  MigManagerOptions opt_;
  Clock& clock_;
  std::unique_ptr<kube::EventRecorder> events_;
  std::string node_uid_;
  std::string handled_;                 // the label value last acted on
  std::set<std::string> paused_;        // operand labels this manager paused
  std::set<std::string> withheld_;      // GPUs withheld for the change in progress
  bool resumed_ = false;

  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kgpu::agent
