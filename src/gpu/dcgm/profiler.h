// DCGM's profiling fields (DCGM_FI_PROF_*, ids 1001..1012) for GPUs where NVML has no GPM
// (Volta, Turing, Ampere, Ada), read through DCGM when it is on the node.
//
// The Profiler loads libdcgm at start(), reaches DCGM (embedded, or a host engine given by
// dcgm-exporter's -r), maps DCGM's GPU ids to NVML's by UUID, and watches the wanted fields on
// one DCGM group per GPU, so a GPU that cannot be profiled (or falls off) costs only its own
// series. read() returns the latest values; values DCGM marks blank or not supported, values of
// a GPU whose status is not OK, and values whose timestamp has not moved for `stale_after` are
// left out (their series are omitted, never exported as 0 or frozen).
//
// Failures never stop the agent: a missing library or symbols, or a failing dcgmInit, leave the
// Profiler unavailable for good (problem() says why); an unreachable or lost host engine is
// retried every `retry` on the next read(). Each change of state is logged once.
//
// Thread safety: start(), read() and fill() are called from one thread at a time (the agent's
// sampling thread after start()); problem() and watched() too.
#pragma once

#include <chrono>
#include <map>
#include <memory>
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

// Latest values: GPU UUID -> field id -> value (ratios 0..1, bytes per second).
using Readings = std::map<std::string, std::map<unsigned short, double>>;

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

  // The latest values; reconnects when due.
  Readings read();
  // read(), then sets each GPU-level entry's profiling readings that NVML left empty: the five
  // GPM-backed ones in their Telemetry members, all of them in Telemetry::prof_fields.
  void fill(std::vector<gpu::Telemetry>& ts);

 private:
  struct Gpu {
    unsigned id = 0;  // DCGM's GPU id
    std::string uuid;
    GroupId group = 0;
    bool grouped = false;
    std::vector<FieldGroupId> field_groups;  // watched on this GPU's group
  };
  bool connect();
  void setup_gpu(Gpu& g);
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
  std::map<std::string, Return> gpu_status_;                       // last non-OK status logged, by UUID
  std::set<std::pair<std::string, unsigned short>> blank_logged_;  // (UUID, field) answered blank
  std::vector<FieldValue> values_;                                 // reused buffer
  // Our group names: unique in a host engine shared with other clients and earlier agents (a
  // container's agent is always pid 1).
  std::string name_prefix_;
  unsigned sequence_ = 0;
  // Per (UUID, field): the newest DCGM timestamp and when it was first seen. A value whose
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
