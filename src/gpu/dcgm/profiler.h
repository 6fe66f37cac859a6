// DCGM's profiling fields (DCGM_FI_PROF_*, ids 1001..1012) for GPUs where NVML has no GPM
// (Volta, Turing, Ampere, Ada), read through DCGM when it is on the node.
//
// The Profiler loads libdcgm at start(), reaches DCGM (embedded, or a host engine given by
// dcgm-exporter's -r), maps DCGM's GPU ids to NVML's by UUID, and watches the wanted fields on
// one DCGM group per GPU, so a GPU that cannot be profiled (or falls off) costs only its own
// series. On a MIG-enabled GPU the GPU instances DCGM lists (dcgmGetGpuInstanceHierarchy) are
// watched too, in a second group of that GPU, and mapped to NVML's by parent GPU and NVML
// GPU-instance id; DCGM's instance ids are its own. read() returns the latest values; values DCGM
// marks blank or not supported, values of a GPU or instance whose status is not OK, and values
// whose timestamp has not moved for `stale_after` are left out (their series are omitted, never
// exported as 0 or frozen).
//
// Failures never stop the agent: a missing library or symbols, or a failing dcgmInit, leave the
// Profiler unavailable for good (problem() says why); an unreachable or lost host engine is
// retried every `retry` on the next read(). A DCGM without the MIG hierarchy call serves the
// GPUs only. Each change of state is logged once.
//
// Thread safety: start(), read() and fill() are called from one thread at a time (the agent's
// sampling thread after start()); problem() and watched() too.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpu/dcgm/library.h"
#include "gpu/types.h"

namespace kgpu::dcgm {

struct ProfilerOptions {
  std::string library;                       // empty: $KGPU_DCGM_LIBRARY, else libdcgm.so.4, libdcgm.so.3
  std::string remote;                        // dcgm-exporter's -r: empty = embedded
  std::vector<unsigned short> fields;        // profiling field ids to watch
  std::chrono::milliseconds interval{5000};  // DCGM's update period for the watches
  std::chrono::milliseconds retry{30000};    // between attempts to reach a host engine
  std::chrono::milliseconds connect_timeout{1000};
  // A value DCGM has not refreshed for this long (at least ten intervals) is omitted.
  std::chrono::milliseconds stale_after{60000};
  Clock* clock = &Clock::real();  // not owned; must outlive the Profiler
};

// Field id -> value (ratios 0..1, bytes per second).
using Values = std::map<unsigned short, double>;

// A MIG GPU instance as NVML names it: the parent GPU's UUID and NVML's GPU-instance id.
struct InstanceKey {
  std::string gpu_uuid;
  unsigned gpu_instance_id = 0;
  auto operator<=>(const InstanceKey&) const = default;
};

// Latest values of the whole GPUs (by UUID) and of MIG GPU instances.
struct Readings {
  std::map<std::string, Values> gpus;
  std::map<InstanceKey, Values> instances;
  bool empty() const { return gpus.empty() && instances.empty(); }
};

class Profiler {
 public:
  explicit Profiler(ProfilerOptions options);
  ~Profiler();
  Profiler(const Profiler&) = delete;
  Profiler& operator=(const Profiler&) = delete;

  // Loads the library and reaches DCGM. False when DCGM gives nothing now (problem() says why);
  // a host engine that cannot be reached yet is tried again by read().
  bool start();
  // Why DCGM gives no values now; empty while it does.
  const std::string& problem() const { return problem_; }
  // Whether a later read() may still succeed (false: no library, missing symbols, dcgmInit failed).
  bool may_recover() const { return library_ok_; }
  // Field ids DCGM serves, by GPU UUID (after a successful setup).
  const std::map<std::string, std::set<unsigned short>>& watched() const { return watched_; }
  // Field ids DCGM serves on MIG GPU instances.
  const std::map<InstanceKey, std::set<unsigned short>>& watched_instances() const { return watched_instances_; }

  // The latest values; reconnects when due.
  Readings read();
  // When the MIG GPU instances in `ts` (NVML's layout now) differ from those watched, reads DCGM's
  // MIG hierarchy again (at once, then at most every `retry` while they differ). Then read(), and
  // sets each entry's profiling readings that NVML left empty, a GPU's from the GPU and a MIG
  // instance's from that GPU instance: the five GPM-backed ones in their Telemetry members, all of
  // them in Telemetry::prof_fields.
  void fill(std::vector<gpu::Telemetry>& ts);

 private:
  // One DCGM group of ours and the watches on it.
  struct Group {
    GroupId id = 0;
    bool created = false;
    std::vector<FieldGroupId> field_groups;
    std::set<unsigned short> served;
  };
  struct Instance {
    unsigned id = 0;       // DCGM's GPU-instance entity id
    unsigned nvml_id = 0;  // NVML's GPU-instance id
    bool operator==(const Instance&) const = default;
  };
  struct Gpu {
    unsigned id = 0;  // DCGM's GPU id
    std::string uuid;
    Group whole;                      // the GPU itself
    Group mig;                        // its GPU instances, when it has any
    std::vector<Instance> instances;  // as DCGM listed them last
  };
  bool connect();
  void setup_gpu(Gpu& g);
  // Creates `grp` holding `members` and watches the wanted fields on it (one by one when DCGM
  // refuses them together). `what` names the members in logs, `tag` ends the group's name. False
  // when the connection is gone.
  bool setup_group(Group& grp, const std::vector<EntityPair>& members, const std::string& what, const std::string& tag);
  // Unwatches and destroys `grp` (while connected) and resets it.
  void drop_group(Group& grp);
  // The group of `g`'s GPU instances, when it has any.
  void setup_instances(Gpu& g);
  // DCGM's GPU instances by DCGM GPU id, with NVML's ids; nullopt when DCGM cannot say (`warn`:
  // logged once per reason).
  std::optional<std::map<unsigned, std::vector<Instance>>> read_hierarchy(bool warn);
  // Re-reads the hierarchy and rebuilds the instance groups of GPUs whose instances changed.
  void refresh_instances();
  void check_layout(const std::vector<gpu::Telemetry>& ts);
  void note_watched(const Gpu& g);
  // Drops the connection; `alive`: first undo our groups and watches.
  void teardown(bool alive);
  void set_problem(const std::string& p, bool warn = true);
  FieldGroupId field_group(const std::vector<unsigned short>& fields, bool* ok);

  ProfilerOptions opt_;
  Clock& clock_;
  Endpoint endpoint_;
  std::unique_ptr<Library> lib_;
  std::unique_ptr<Connection> conn_;
  bool library_ok_ = false;
  std::string problem_;
  Clock::SteadyTime next_try_{};
  std::vector<Gpu> gpus_;
  std::map<std::vector<unsigned short>, FieldGroupId> field_groups_;
  std::map<std::string, std::set<unsigned short>> watched_;
  std::map<InstanceKey, std::set<unsigned short>> watched_instances_;
  // Below, an entity is named as in logs: "GPU <uuid>", "GPU instance <id> of GPU <uuid>".
  std::map<std::string, Return> gpu_status_;                       // last non-OK status logged, by entity
  std::set<std::pair<std::string, unsigned short>> blank_logged_;  // (entity, field) answered blank
  std::string hierarchy_problem_;                                  // why DCGM gave no MIG hierarchy (logged)
  Clock::SteadyTime next_layout_try_{};                            // while NVML's MIG layout differs from ours
  std::vector<FieldValue> values_;                                 // reused buffer
  // Our group names: unique in a host engine shared with other clients and earlier agents (a
  // container's agent is always pid 1).
  std::string name_prefix_;
  unsigned sequence_ = 0;
  // Per (entity, field): the newest DCGM timestamp and when it was first seen. A value whose
  // timestamp stops moving for stale_after_ is no longer being measured: it is omitted.
  struct Seen {
    int64_t ts = 0;
    Clock::SteadyTime since{};
  };
  std::map<std::pair<std::string, unsigned short>, Seen> seen_;
  std::set<std::pair<std::string, unsigned short>> stale_logged_;
  std::chrono::steady_clock::duration stale_after_{};
};

// The start-up line for profiling fields the agent cannot export ("" when none is missing):
// which wanted fields are missing on which GPUs and why. NVML GPM provides GR_ENGINE_ACTIVE,
// PIPE_TENSOR_ACTIVE, DRAM_ACTIVE and PCIE_TX/RX_BYTES on GPUs with `gpm_supported`; the rest
// need DCGM. `dcgm_problem` is why DCGM is not available.
std::string missing_fields_message(const gpu::Inventory& inv, const std::vector<unsigned short>& wanted,
                                   const std::string& dcgm_problem);

}  // namespace kgpu::dcgm
