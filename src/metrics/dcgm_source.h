// The agent's use of DCGM: which profiling fields the counters ask for, whether NVML already
// provides them (GPM, Hopper and later), and the start-up line for those it cannot export.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "gpu/dcgm/profiler.h"
#include "gpu/types.h"
#include "metrics/counters.h"

namespace kgpu::metrics {

struct DcgmOptions {
  bool enabled = true;  // --dcgm=off: never load DCGM
  std::string library;  // --dcgm-library / $KGPU_DCGM_LIBRARY
  std::string remote;   // -r / $DCGM_REMOTE_HOSTENGINE_INFO: empty = embedded
  std::chrono::milliseconds retry{30000};
};

// Profiling field ids (DCGM_FI_PROF_*) among the counters.
std::vector<unsigned short> profiling_fields(const std::vector<Counter>& counters);

// Starts a Profiler when the counters ask for a profiling field that some GPU of `inv` cannot get
// from NVML GPM; logs (warn) which fields are missing on which GPUs and why when DCGM is not
// there. Null when DCGM is not needed, turned off, or unusable for good. `interval` is the
// sampling interval (DCGM's watch period).
std::unique_ptr<dcgm::Profiler> start_profiling(const DcgmOptions& options, const std::vector<Counter>& counters,
                                                const gpu::Inventory& inv, std::chrono::milliseconds interval,
                                                Clock* clock);

}  // namespace kgpu::metrics
