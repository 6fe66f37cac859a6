// What the files of the fake libnvidia-ml.so.1 share: the loaded node and its handles (Fake),
// the entry sequence of every call (Call), the conversions to NVML's types, and the declaration
// of every exported nvml* entry point with its abi.h type. Internal to tools/fake-nvml.
//
// Thread safety: every entry point takes one global lock, as callers may use NVML from any
// thread; nvmlEventSetWait_v2 waits without holding it.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpu/nvml/abi.h"
#include "state.h"

#define FAKE_API extern "C" __attribute__((visibility("default")))

namespace kgpu::fake_nvml {

using namespace kgpu::nvml;
using kgpu::fake::Gpu;
using kgpu::fake::MigInstance;
using kgpu::fake::mig_uuid;
using kgpu::fake::Node;

struct Handle {
  unsigned gpu = 0;
  int mig = -1;             // -1 for the GPU itself, else a MIG instance (GPU instance, compute instance, MIG device)
  uint64_t generation = 0;  // MIG handles: the node file's layout generation they belong to
  unsigned gpu_instance_id = 0;  // MIG handles: the instance, found by id (stable while it exists, as in NVML)
};

struct EventSetImpl {
  std::map<unsigned, unsigned long long> registered;  // gpu -> event mask
  std::deque<EventData> queue;
};

struct GpmSampleImpl {
  int gpu = -1;
  long long gi = -1;  // GPU instance (nvmlGpmMigSampleGet), -1 for the whole GPU
  double t = 0;
};

class Fake {
 public:
  std::mutex mu;
  std::condition_variable events_cv;
  int init_count = 0;
  bool loaded = false;
  std::string path;
  struct timespec mtime {};
  off_t size = -1;
  std::string last_error;  // why the node could not be loaded (returned by nvmlErrorString(UNKNOWN))
  Node node;
  std::deque<Handle> arena;  // stable addresses for handles
  std::vector<Handle*> gpu_handles;
  std::vector<std::vector<Handle*>> mig_handles;
  std::vector<uint64_t> mig_generation;
  uint64_t generations = 0;  // never reset, so a stale MIG handle never matches
  std::set<unsigned> lost_seen;
  size_t xids_seen = 0;
  // Drain states and resets (drain.cc), in memory only: a reload of the node keeps them.
  std::set<unsigned> drained, removed;
  std::map<unsigned, int> persistence;  // set by nvmlDeviceSetPersistenceMode; unset: the node's
  std::map<unsigned, unsigned> resets;  // completed removals + rediscoveries per GPU
  // MIG layouts changed through NVML (mig_manage.cc), by GPU: kept over reloads of the node file,
  // which describes the layout the node started with.
  struct MigOverride {
    bool enabled = false, pending = false;
    std::vector<MigInstance> instances;
  };
  std::map<unsigned, MigOverride> mig_overrides;
  // $KGPU_FAKE_NVML_STATE: where the MIG overrides are kept across processes (as a real driver keeps
  // its MIG layout); read when the node is first loaded, written on every change. "" = in memory only.
  std::string state_path;
  void load_mig_state();  // into mig_overrides (an unreadable or malformed file is logged and ignored)
  void save_mig_state() const;
  // Matching calls seen per call fault (by index in node.call_faults), for `after`; reset on reload.
  mutable std::map<size_t, unsigned> fault_hits;
  std::set<EventSetImpl*> sets;  // owned: freed by nvmlEventSetFree, or here at unload
  // The simulated GPUs run on real time (telemetry curves, energy, event waits), like a driver.
  kgpu::Clock& clock = kgpu::Clock::real();
  kgpu::Clock::SteadyTime t0 = clock.steady_now();

  ~Fake();

  // Forgets the node; handles given out before stay valid memory but no longer resolve.
  void reset();

  double now() const { return std::chrono::duration<double>(clock.steady_now() - t0).count(); }

  // A node description that cannot be used, on the process's log (the fake's own copy of
  // common/log, configured from KGPU_LOG_LEVEL / KGPU_LOG_FORMAT like the agent's).
  void diagnose(const std::string& message) const;

  // Loads (first time) or reloads (file changed) the node. Returns false if never loaded.
  bool refresh();

  void apply(Node n, bool first);

  static std::string layout_key(const Gpu& g);
  // Records GPU `gpu`'s MIG state as changed through NVML and gives its new instances handles;
  // handles of the instances that remain stay valid, those of destroyed ones no longer resolve.
  void mig_changed(unsigned gpu);

  // Queues an event on every set registered for that GPU and type, and wakes the waiters.
  void deliver(unsigned gpu, unsigned long long type, uint64_t data);

  // Lost by the node (faults.lost) or removed from the driver (nvmlDeviceRemoveGpu_v2) and not
  // rediscovered yet.
  bool is_lost(unsigned gpu) const;

  // The injected result (and delay) of the first call fault matching fn and gpu, else kSuccess.
  Return fault(const char* fn, std::optional<unsigned> gpu) const;
};

// Destroyed when the library is unloaded (dlclose or exit); callers must have stopped calling.
Fake& fake();

// Entry of every call: lock, initialized, refreshed, device resolved, faults applied.
struct Call {
  std::unique_lock<std::mutex> lock;
  Return rc = kSuccess;
  Gpu* gpu = nullptr;
  MigInstance* mig = nullptr;
  unsigned index = 0;

  Call(const char* fn, Device d = nullptr, bool needs_device = false, bool allow_mig = true);
  double now() const { return fake().now(); }
};

unsigned to_uint(double v);
unsigned long long to_ull(double v);
void copy_string(const std::string& s, char* buf, unsigned length, Return& rc);
void fill_pci(const Gpu& g, PciInfo* pci);
uint64_t mig_used_mib(const Gpu& g, const MigInstance& m);
uint64_t gpu_used_mib(const Gpu& g);
std::string error_text(Return r);

}  // namespace kgpu::fake_nvml

// Every exported entry point, declared with its abi.h type (abi_check.cc checks each one is defined).
using namespace kgpu::nvml;
#define KGPU_FAKE_DECLARE(name, params) FAKE_API Return name params;
KGPU_NVML_FUNCTIONS(KGPU_FAKE_DECLARE)
#undef KGPU_FAKE_DECLARE
FAKE_API const char* nvmlErrorString(Return r);
