// The agent's DRA mode (--gpu-api=dra, or the node label kgpu.io/gpu-api=dra): the DRA driver
// (src/dra) for this node's GPUs instead of the device plugins. It owns the Driver and its kubelet
// Plugin, and a thread that serves sockets a restarting kubelet wiped (every `poll`) and refreshes
// the device list from NVML (every `inventory_interval`: MIG layout, lost GPUs).
//
// Health: a GPU NVML reports lost (or not readable) is unhealthy, and so are its MIG devices;
// claims naming it fail to prepare. A lost GPU's devices stay in devices() as last seen (NVML can
// no longer describe them) so that the pool keeps them, tainted NoExecute, until the GPU is back.
// After an inventory read that changed the pool's content (devices with their health), it goes to
// `publish`, the ResourceSlice publisher's update(). XID-based device health is not tracked in DRA mode yet.
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

#include "agent/mps.h"
#include "agent/plugin_manager.h"
#include "dra/plugin.h"
#include "dra/slices.h"
#include "gpu/node.h"

namespace kgpu::kube {
class Client;
}

namespace kgpu::agent {

// The node label that chooses the GPU API per node (wins over --gpu-api).
inline constexpr const char* kGpuApiLabel = "kgpu.io/gpu-api";

struct DraServiceOptions {
  std::string driver_name = std::string(dra::kDefaultDriverName);
  dra::PluginOptions dirs;               // plugins_registry and plugins directories
  std::string node_name;                 // the pool name
  DevicePluginOptions plugins;           // sharing config (driver root, MPS root), cdi_root, proc_root, sysfs paths
  std::shared_ptr<kube::Client> client;  // reads ResourceClaims; null: every prepare fails, saying why
  std::string sysfs_root = "/sys";       // for resource.kubernetes.io/pcieRoot
  std::chrono::milliseconds poll{100};
  std::chrono::milliseconds inventory_interval{std::chrono::seconds(10)};
  MpsControl* mps = nullptr;  // MPS control daemons per claim (not owned); null: client limits only
  // Called (on the service's thread, or in start()) with the pool's whole content after an
  // inventory read that changed it; must not block. Null: nothing is published.
  std::function<void(std::vector<dra::PublishedDevice>)> publish;
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

 private:
  void loop();
  void refresh();
  bool sick_locked(const dra::Device& d) const;  // mu_ held

  gpu::NodeGpus& node_;
  DraServiceOptions opt_;
  std::unique_ptr<dra::Driver> driver_;
  std::unique_ptr<dra::Plugin> plugin_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;             // guarded by mu_
  std::vector<dra::Device> devices_;  // guarded by mu_
  std::set<std::string> unhealthy_;   // guarded by mu_: UUIDs of lost GPUs and their MIG devices
  std::set<unsigned> lost_gpus_;      // guarded by mu_: indices of GPUs NVML reports lost
  // guarded by mu_: when each unhealthy device (UUID) was first seen so: the taint's timeAdded
  std::map<std::string, std::chrono::system_clock::time_point> sick_since_;
  std::vector<dra::PublishedDevice> published_;  // guarded by mu_: what `publish` was last given
  std::vector<std::string> problems_;            // guarded by mu_: last logged
  std::thread thread_;
};

}  // namespace kgpu::agent
