// The ResourceSlice publisher of one node's pool (resource.k8s.io/v1): the node's DRA devices,
// as NVIDIA's GPU driver publishes them — pool name = node name, `spec.nodeName` set, owned by the
// Node — kept equal to what the agent sees, with health taints (docs/dra.md, "ResourceSlices and
// health").
//
// Contract:
// - The caller gives the pool's whole content with update(): every device as its rendered
//   `devices[]` entry (name, attributes, capacity; dra::Device's rendering) and its health. A lost
//   GPU's devices must stay in the set (health.lost) for their NoExecute taint to be published: a
//   device left out is removed from the pool, and nothing evicts the pods using it. The
//   publisher adds the health taints, splits the devices into slices at the API's limits (128
//   devices, 64 when a slice carries a taint or consumes counters), names them `<node>-<driver>-<i>`,
//   and makes the API
//   hold exactly those: it creates and updates them, and deletes the slices of this driver and node
//   that are not part of the pool any more (an earlier layout, an earlier pool name).
// - Counter sets (KEP-4815 partitionable devices, dynamic MIG) go into slices of their own, at most
//   8 sets each, before the device slices (since Kubernetes 1.35 a slice holds sharedCounters or
//   devices, not both; all of one pool and generation). An API server that does not serve them
//   (feature gate DRAPartitionableDevices off, or older than 1.34) drops spec.sharedCounters
//   silently: the publisher sees it in the written object, stops that pass before any device slice
//   is written (devices consuming counters that are not there would be allocated without limit),
//   and reports it (PublisherStats::counters_dropped) until a pool without counters is published.
// - pool.generation advances on every change of the pool's content (devices, attributes, taints,
//   slice count) and every slice of the pool carries it; an unchanged set writes nothing. What the
//   publisher wrote is recognised by its content hash (annotation kgpu.io/slice-content), so a
//   restarted agent with the same devices writes nothing either.
// - Failures (API errors, conflicts with another writer, a missing Node) are retried on the worker
//   thread with exponential back-off and jitter (initial_backoff .. max_backoff); a newer update()
//   is picked up at the next attempt. Every `resync` the API's slices are re-read and repaired.
//
// Threads: start() runs one worker thread; update(), stats() and wait_published() may be called
// from any thread and never wait for the API. sync_once() and remove_all() run on the caller's
// thread and must not overlap the worker (call them without start(), or after stop()).
// The client is not owned and must outlive the publisher.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/error.h"
#include "apiclient/client.h"
#include "dra/devices.h"

namespace kgpu::dra {

// A device's health in the device plugin's terms (agent::HealthBook, docs/device-plugin.md):
// an Unhealthy device, whether what marked it needs a GPU reset to clear (an XID of
// agent::reset_required_xids(), a pending row remap), and whether its GPU fell off the bus or
// stopped answering. The recovery rule that makes it healthy again is the device plugin's.
struct DeviceHealth {
  bool healthy = true;
  bool needs_reset = false;
  bool lost = false;
  std::string reason;                           // "XID 79", "GPU lost": the taint's value, made a label value
  std::chrono::system_clock::time_point since;  // when it became unhealthy: timeAdded (epoch: left to the API)
};

struct PublishedDevice {
  nlohmann::json device;  // one `devices[]` entry: name, attributes, capacity (no taints)
  DeviceHealth health;
};

// The DeviceTaints (resource.k8s.io/v1) for a device's health: none when healthy; a lost GPU
// `<driver>/unreachable` NoExecute; a reset-class XID `<driver>/reset-required` NoSchedule; any
// other fault `<driver>/not-ready` NoSchedule. The keys are NVIDIA's well-known device taint keys.
nlohmann::json health_taints(std::string_view driver, const DeviceHealth& health);

struct PublisherOptions {
  std::string driver = "gpu.nvidia.com";
  std::string node_name;            // required: spec.nodeName, the pool's name, the owner Node
  size_t max_devices = 128;         // per slice (ResourceSlice limit)
  size_t max_tainted_devices = 64;  // per slice when any device of the pool carries a taint
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{60'000};
  std::chrono::milliseconds resync{std::chrono::minutes(10)};  // 0: never re-read while unchanged
  Clock* clock = &Clock::real();                               // not owned
};

// The slices' specs for a pool (pure): the counter slices, then `count` device slices of at most
// the limit each, in device order, with taints added; pool.generation is left 0 for the caller to set.
std::vector<nlohmann::json> slice_specs(const PublisherOptions& options, std::span<const PublishedDevice> devices,
                                        std::span<const CounterSet> counter_sets = {});

// The name of slice `index` of the node's pool: "<node>-<driver>-<index>" (shortened with a hash
// when that would be longer than a name may be).
std::string slice_name(const PublisherOptions& options, size_t index);

struct PublisherStats {
  uint64_t syncs = 0;  // passes that read the API
  uint64_t creates = 0, updates = 0, deletes = 0;
  uint64_t failures = 0;    // passes that ended in an error (each retried)
  int64_t generation = -1;  // pool.generation the API holds, as last seen (-1: nothing yet)
  size_t slices = 0;        // slices of the pool the API holds
  uint64_t wanted = 0;      // the version of the last update()
  uint64_t published = 0;   // the version the API last matched
  std::string last_error;   // empty after a pass that succeeded
  bool counters_dropped = false;  // the API server dropped spec.sharedCounters (see above)
};

class SlicePublisher {
 public:
  SlicePublisher(kube::Client& client, PublisherOptions options);
  ~SlicePublisher();
  SlicePublisher(const SlicePublisher&) = delete;
  SlicePublisher& operator=(const SlicePublisher&) = delete;

  void start();
  void stop();  // idempotent; joins the worker

  // The pool's new content; returns its version (see PublisherStats::published).
  uint64_t update(std::vector<PublishedDevice> devices, std::vector<CounterSet> counter_sets = {});
  // Whether version `version` (or a later one) has been published, waiting up to `timeout`.
  bool wait_published(uint64_t version, std::chrono::milliseconds timeout);
  PublisherStats stats() const;

  // One pass: read the API's slices of this driver and node and write what differs.
  Result<void> sync_once();
  // Deletes every slice of this driver and node (uninstall); returns how many.
  Result<size_t> remove_all();

 private:
  void run();
  Result<void> pass(const std::vector<PublishedDevice>& devices, const std::vector<CounterSet>& counter_sets);
  Result<std::vector<nlohmann::json>> list_slices();
  Result<std::string> node_uid();

  kube::Client& client_;
  PublisherOptions options_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<PublishedDevice> devices_;
  std::vector<CounterSet> counter_sets_;
  uint64_t version_ = 0;
  bool dirty_ = false;
  PublisherStats stats_;

  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kgpu::dra
