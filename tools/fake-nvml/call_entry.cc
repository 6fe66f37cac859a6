// The entry sequence of every nvml* call (Call): take the lock, check initialization, refresh
// the node, resolve the device handle, apply injected faults.
#include <algorithm>

#include "fake_nvml.h"

namespace kgpu::fake_nvml {

Call::Call(const char* fn, Device d, bool needs_device, bool allow_mig) : lock(fake().mu) {
  Fake& f = fake();
  if (f.init_count == 0) {
    rc = kErrorUninitialized;
    return;
  }
  f.refresh();
  if (needs_device) {
    if (d == nullptr) {
      rc = kErrorInvalidArgument;
      return;
    }
    auto* h = reinterpret_cast<Handle*>(d);
    if (h->gpu >= f.node.gpus.size()) {
      rc = kErrorInvalidArgument;
      return;
    }
    index = h->gpu;
    gpu = &f.node.gpus[h->gpu];
    if (h->mig >= 0) {
      // Stale: the node file's layout changed since the handle was taken, or its instance is gone.
      auto it = std::find_if(gpu->mig.begin(), gpu->mig.end(),
                             [&](const MigInstance& m) { return m.gpu_instance_id == h->gpu_instance_id; });
      if (h->generation != f.mig_generation[h->gpu] || it == gpu->mig.end()) {
        rc = kErrorInvalidArgument;
        return;
      }
      h->mig = static_cast<int>(it - gpu->mig.begin());
      if (!allow_mig) {
        rc = kErrorNotSupported;
        return;
      }
      mig = &gpu->mig[h->mig];
    }
    if (f.is_lost(index)) {
      rc = kErrorGpuIsLost;
      return;
    }
  }
  rc = f.fault(fn, needs_device ? std::optional(index) : std::nullopt);
}

}  // namespace kgpu::fake_nvml
