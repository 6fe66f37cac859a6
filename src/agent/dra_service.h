// The agent's DRA mode (--gpu-api=dra, or the node label kgpu.io/gpu-api=dra): the DRA driver
// (src/dra) for this node's GPUs instead of the device plugins. It owns the Driver and its kubelet
// Plugin, and a thread that serves sockets a restarting kubelet wiped (every `poll`) and refreshes
// the device list from NVML (every `inventory_interval`: MIG layout, lost GPUs).
//
// Health: the device plugin's health book and rules (agent/health.h): XID events (NVML's event
// thread), the probe of every GPU each `inventory_interval`, and the recovery rule, with the same
// options (DP_DISABLE_HEALTHCHECKS / DP_ENABLE_HEALTHCHECKS, --health-recovery). An unhealthy
// device, or a MIG device of an unhealthy GPU, fails to prepare and is published with a taint
// (dra::health_taints: reset-required or not-ready NoSchedule, unreachable NoExecute while its
// GPU is lost). A lost GPU's devices stay in devices() as last seen (NVML can no longer describe
// them) so that the pool keeps them. After an inventory read or an event that changed the pool's
// content (devices with their health), it goes to `publish`, the ResourceSlice publisher's update().
//
// Dynamic MIG (`dynamic_mig`, docs/dra.md "Dynamic MIG"): a GPU in MIG mode whose MIG instances
// are all partitions of claims this driver prepared (none at first) is published partitionable
// (dra::build_devices), and a claim allocated one of its partitions gets the MIG instance created
// at prepare and destroyed at unprepare (gpu/mig_manage.h). A GPU with other instances (made by
// an operator, `kgpu mig apply` or the MIG manager) is published as it is, and the log says why.
// When the API server drops the counter sets (`counters_dropped`), dynamic MIG turns off for
// the agent's life: the GPUs are published as their instances are, and the log says so.
//
// Thread safety: start()/stop() from one owner thread; devices() and status getters from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "agent/health.h"
#include "agent/mps.h"
#include "agent/plugin_manager.h"
#include "dra/plugin.h"
#include "dra/slices.h"
#include "gpu/mig.h"
#include "gpu/node.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::agent {

// The node label that chooses the GPU API per node (wins over --gpu-api).
inline constexpr const char* kGpuApiLabel = "kgpu.io/gpu-api";

struct DraServiceOptions {
  std::string driver_name = std::string(dra::kDefaultDriverName);
  dra::PluginOptions dirs;  // plugins_registry and plugins directories
  std::string node_name;    // the pool name
  // Sharing config (driver root, MPS root), cdi_root, proc_root, sysfs paths; the health options
  // (disable/enable_health_checks, health_recovery) and the clock.
  DevicePluginOptions plugins;
  std::shared_ptr<kube::Client> client;  // reads ResourceClaims; null: every prepare fails, saying why
  std::string sysfs_root = "/sys";       // for resource.kubernetes.io/pcieRoot
  std::chrono::milliseconds poll{100};
  std::chrono::milliseconds inventory_interval{std::chrono::seconds(10)};  // inventory read and health probes
  MpsControl* mps = nullptr;  // MPS control daemons per claim (not owned); null: client limits only
  // Called (on the service's thread, or in start()) with the pool's whole content after an
  // inventory read that changed it; must not block. Null: nothing is published.
  std::function<void(std::vector<dra::PublishedDevice>, std::vector<dra::CounterSet>)> publish;
  bool dynamic_mig = false;
  // Whether the publisher found the API server dropping spec.sharedCounters (any thread). Null: never.
  std::function<bool()> counters_dropped;
};

class DraService {
 public:
  // `node` (not owned) must outlive the service.
  DraService(gpu::NodeGpus& node, DraServiceOptions options);
  ~DraService();
  DraService(const DraService&) = delete;
  DraService& operator=(const DraService&) = delete;

  // Reads the inventory and the config, loads the checkpoint and serves the sockets. Errors say what.
  Result<void> start();
  void stop();

  // The devices now published (for the ResourceSlice publisher).
  std::vector<dra::Device> devices() const;
  const dra::Plugin* plugin() const { return plugin_.get(); }
  bool dynamic_mig() const;  // on, and not turned off by the API server

 private:
  void loop();
  void refresh();                                               // inventory, probes and the recovery rule; publishes
  void publish_pool();                                          // the pool's content to `publish` when it changed
  void on_event(const gpu::Event& e);                           // the event thread
  void start_event_watcher();                                   // start() or the service's thread
  dra::DeviceHealth health_locked(const dra::Device& d) const;  // mu_ held
  // The MIG profiles GPU `uuid` (at NVML index `index`) offers, read once per GPU: they follow from
  // the GPU's model and cannot change while it is in MIG mode.
  Result<std::vector<gpu::mig::Offer>> offers_of(unsigned index, const std::string& uuid);
  // Dynamic MIG: the GPUs to publish partitionable, with their offers (problems: why not).
  // `ours`: the claims' partitions read before `inv` (those read after are added).
  std::map<unsigned, std::vector<gpu::mig::Offer>> partitionable(const gpu::Inventory& inv, std::vector<dra::Partition> ours,
                                                                 std::vector<std::string>& problems);
  Result<dra::Device> create_partition(const dra::Device& partition);
  Result<void> destroy_partition(const dra::Partition& p);

  gpu::NodeGpus& node_;
  DraServiceOptions opt_;
  Clock& clock_;
  std::unique_ptr<dra::Driver> driver_;
  std::unique_ptr<dra::Plugin> plugin_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;                        // guarded by mu_
  bool dirty_ = false;                           // guarded by mu_: an event changed the health; publish now
  std::vector<dra::Device> devices_;             // guarded by mu_
  gpu::Inventory inventory_;                     // guarded by mu_: the last read, lost GPUs as last known
  std::set<unsigned> lost_gpus_;                 // guarded by mu_: indices of GPUs NVML reports lost
  HealthBook health_;                            // guarded by mu_
  std::vector<dra::CounterSet> counter_sets_;     // guarded by mu_
  std::vector<dra::PublishedDevice> published_;  // guarded by mu_: what `publish` was last given
  std::vector<dra::CounterSet> published_sets_;  // guarded by mu_
  bool dynamic_ = false;                         // guarded by mu_
  std::vector<std::string> problems_;            // guarded by mu_: last logged
  std::mutex offers_mu_;
  std::map<std::string, std::vector<gpu::mig::Offer>> offers_;  // guarded by offers_mu_: by GPU UUID
  std::unique_ptr<gpu::EventWatcher> events_;    // start() and the service's thread
  std::thread thread_;
};

}  // namespace kgpu::agent
