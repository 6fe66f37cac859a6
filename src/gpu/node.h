// The node's GPUs read through NVML: inventory, telemetry, processes, and the XID/ECC event stream.
//
// One GPU failing (GPU_IS_LOST, any error) never stops the others: its GpuInfo/Telemetry carries
// the error and the rest are read as usual. A value the GPU does not support is nullopt; other
// failed calls are also listed (call name + NVML code) for the agent's error counters.
//
// Thread safety: all const methods may run concurrently. telemetry() is internally serialized
// (it keeps the previous GPM samples per GPU); it may run concurrently with the const methods.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/error.h"
#include "gpu/nvml/library.h"
#include "gpu/types.h"

namespace kgpu::gpu {

class NodeGpus {
 public:
  // Loads `library_path` (see nvml::resolve_library_path) and initializes NVML.
  static Result<std::unique_ptr<NodeGpus>> open(const std::string& library_path);
  ~NodeGpus();

  const nvml::Library& library() const { return *lib_; }

  Result<unsigned> device_count() const;

  // Everything static about the node. Fails only when NVML cannot even count the GPUs.
  Result<Inventory> inventory() const;

  // One entry per GPU, then one per MIG GPU instance (gpu_instance_id set). GPM ratios appear
  // from the second call on, once two samples are at least 100 ms apart. Failures that concern
  // no single GPU (the GPU count) are appended to `node_errors` when given.
  std::vector<Telemetry> telemetry(std::vector<CallError>* node_errors = nullptr);

  Result<std::vector<ProcessInfo>> processes(unsigned gpu_index) const;
  // Per-process utilization samples newer than `since_us` (NVML timestamps, microseconds).
  // Empty when there are none; kNotSupported on MIG-enabled GPUs.
  Result<std::vector<ProcessUtilization>> process_utilization(unsigned gpu_index, uint64_t since_us) const;

  // Handle of GPU `index`; errors name the GPU.
  Result<nvml::Device> handle(unsigned index) const;

  // A cheap "is this GPU answering" check for health tracking (three NVML calls): the GPU's
  // UUID as NVML reads it now, whether it is lost, and whether a row remap waits for a reset.
  // `lost` is also set when any other reading (telemetry) got GPU_IS_LOST for this GPU since the
  // previous probe of it, so the probe and gpu::answers() over telemetry agree: a GPU is down when
  // NVML does not return its handle and UUID, or any call on it returned GPU_IS_LOST.
  struct Probe {
    std::string uuid;
    bool lost = false;
    std::optional<std::string> error;    // why it did not answer
    std::optional<bool> remap_pending;   // nullopt: not supported
  };
  Probe probe(unsigned index) const;

  // The readings remediation classifies (health/fault_actions.h Signal), each nullopt when NVML
  // does not report it for this GPU.
  struct FaultSignals {
    bool lost = false;
    std::optional<bool> remap_pending, remap_failure;
    std::optional<unsigned long long> ecc_volatile_uncorrected;
    std::optional<bool> thermal_slowdown, power_slowdown;
  };
  FaultSignals fault_signals(unsigned index) const;

  // NVML field 230 of GPU `index`: the driver's recovery action (nvmlDeviceGpuRecoveryAction_t);
  // nullopt when the driver does not report it.
  std::optional<unsigned> recovery_action(unsigned index) const;

  // Resets GPU `index` (known as `uuid`) through NVML's drain states: persistence mode off when it
  // is on (it counts as an attachment), drain, remove from the driver (PCIe link kept), rediscover,
  // persistence mode back as it was. A process still attached fails it with IN_USE and the GPU is
  // left as it was (drain state cleared). Errors name the step. Handles taken before are invalid
  // after it (this class looks them up by index on every call). Needs root on a real node.
  Result<void> reset(unsigned index, const std::string& uuid) const;

 private:
  explicit NodeGpus(std::unique_ptr<nvml::Library> lib) : lib_(std::move(lib)) {}
  void note_lost(unsigned index, const char* call) const;  // a reading got GPU_IS_LOST
  GpuInfo read_gpu(unsigned index) const;
  void read_mig(nvml::Device dev, GpuInfo& gpu) const;
  // GPM ratios of GPU `index` (`dev`), or with `gi` of that GPU instance (nvmlGpmMigSampleGet).
  void read_gpm(unsigned index, nvml::Device dev, std::optional<unsigned> gi, Telemetry& t);

  std::unique_ptr<nvml::Library> lib_;
  mutable std::mutex lost_mu_;
  mutable std::map<unsigned, std::string> lost_seen_;  // GPU index -> call that got GPU_IS_LOST

  struct GpmState {
    nvml::GpmSample sample = nullptr;
    std::chrono::steady_clock::time_point taken;
  };
  std::mutex telemetry_mu_;
  // By (GPU index, GPU-instance id or kWholeGpu); guarded by telemetry_mu_.
  static constexpr unsigned kWholeGpu = ~0u;
  std::map<std::pair<unsigned, unsigned>, GpmState> gpm_;
};

// Whether a GPU's reading says it answers NVML: its handle and UUID were read and no call returned
// GPU_IS_LOST. Any other failed call is a missing value, not a down GPU. kgpu_gpu_up is this; the
// device plugin's probe applies the same rule (Node::probe).
inline bool answers(const Telemetry& t) { return !t.lost && !t.uuid.empty(); }

// Delivers XID and ECC events from NVML on its own thread until stopped.
//
// The callback runs on the watcher's thread; it must not block for long. Stop (or destruction)
// returns within about one wait timeout.
class EventWatcher {
 public:
  using Callback = std::function<void(const Event&)>;

  // Registers every GPU for the event types it supports among XID, single- and double-bit ECC.
  // A GPU that cannot be registered is reported in registration_errors() and skipped; fails only
  // when no event set can be created at all.
  static Result<std::unique_ptr<EventWatcher>> start(
      const NodeGpus& node, Callback callback, std::chrono::milliseconds wait_timeout = std::chrono::milliseconds(500));
  ~EventWatcher();
  void stop();

  const std::vector<std::string>& registration_errors() const { return registration_errors_; }

 private:
  EventWatcher(const NodeGpus& node, Callback cb, std::chrono::milliseconds timeout)
      : node_(node), callback_(std::move(cb)), timeout_(timeout) {}
  void run();

  const NodeGpus& node_;
  Callback callback_;
  std::chrono::milliseconds timeout_;
  nvml::EventSet set_ = nullptr;
  std::map<nvml::Device, unsigned> index_of_;
  std::map<nvml::Device, std::string> uuid_of_;
  std::vector<std::string> registration_errors_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

// Architecture name ("Hopper") and GFD family ("hopper") for an NVML architecture value.
const char* architecture_name(unsigned arch);
std::string architecture_family(unsigned arch);

}  // namespace kgpu::gpu
