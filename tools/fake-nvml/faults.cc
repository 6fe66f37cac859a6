// Fault injection: GPUs the node marks lost, and the failures and delays the node injects into
// named calls (see docs/fake-nvml.md).
#include <algorithm>
#include <chrono>
#include <thread>

#include "fake_nvml.h"

namespace kgpu::fake_nvml {

bool Fake::is_lost(unsigned gpu) const {
  return removed.contains(gpu) || std::find(node.lost.begin(), node.lost.end(), gpu) != node.lost.end();
}

Return Fake::fault(const char* fn, std::optional<unsigned> gpu) const {
  for (size_t i = 0; i < node.call_faults.size(); ++i) {
    const auto& f = node.call_faults[i];
    if (f.call != fn || (f.gpu && (!gpu || *f.gpu != *gpu))) continue;
    const unsigned seen = fault_hits[i]++;
    if (seen < f.after || (f.times > 0 && seen >= f.after + f.times)) continue;
    if (f.delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(f.delay_ms));
    return f.error;
  }
  return kSuccess;
}

}  // namespace kgpu::fake_nvml
