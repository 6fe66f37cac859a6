// Entry points for NVML's drain states and the GPU reset they make (remove from the driver, then
// rediscover), and for persistence mode, which counts as an attachment. In memory only: a reload
// of the node keeps them. Unlike the real driver, a removed GPU keeps its index (it answers
// GPU_IS_LOST until rediscovered) instead of renumbering the GPUs after it.
#include <cstring>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

namespace {

// The GPU at the PCI address (domain and bus; the fake's GPUs are all device 0), or -1.
int find_gpu(const Fake& f, const PciInfo* pci) {
  for (size_t i = 0; i < f.node.gpus.size(); ++i) {
    if (f.node.gpus[i].domain == pci->domain && f.node.gpus[i].bus == pci->bus) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

FAKE_API Return nvmlDeviceSetPersistenceMode(Device d, int mode) {
  Call c("nvmlDeviceSetPersistenceMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mode != kFeatureEnabled && mode != kFeatureDisabled) return kErrorInvalidArgument;
  fake().persistence[c.index] = mode;
  return kSuccess;
}

FAKE_API Return nvmlDeviceModifyDrainState(PciInfo* pci, int state) {
  Call c("nvmlDeviceModifyDrainState");
  if (c.rc != kSuccess) return c.rc;
  if (pci == nullptr || (state != kFeatureEnabled && state != kFeatureDisabled)) return kErrorInvalidArgument;
  Fake& f = fake();
  const int g = find_gpu(f, pci);
  if (g < 0) return kErrorNotFound;
  if (const Return r = f.fault("nvmlDeviceModifyDrainState", static_cast<unsigned>(g)); r != kSuccess) return r;
  if (state == kFeatureEnabled) {
    f.drained.insert(static_cast<unsigned>(g));
  } else {
    f.drained.erase(static_cast<unsigned>(g));
  }
  return kSuccess;
}

FAKE_API Return nvmlDeviceQueryDrainState(PciInfo* pci, int* state) {
  Call c("nvmlDeviceQueryDrainState");
  if (c.rc != kSuccess) return c.rc;
  if (pci == nullptr || state == nullptr) return kErrorInvalidArgument;
  Fake& f = fake();
  const int g = find_gpu(f, pci);
  if (g < 0) return kErrorNotFound;
  *state = f.drained.contains(static_cast<unsigned>(g)) ? kFeatureEnabled : kFeatureDisabled;
  return kSuccess;
}

FAKE_API Return nvmlDeviceRemoveGpu_v2(PciInfo* pci, int gpu_state, int link_state) {
  Call c("nvmlDeviceRemoveGpu_v2");
  if (c.rc != kSuccess) return c.rc;
  if (pci == nullptr || gpu_state < kDetachGpuKeep || gpu_state > kDetachGpuRemove || link_state < 0 || link_state > 1) {
    return kErrorInvalidArgument;
  }
  Fake& f = fake();
  const int g = find_gpu(f, pci);
  if (g < 0) return kErrorNotFound;
  const auto gpu = static_cast<unsigned>(g);
  if (const Return r = f.fault("nvmlDeviceRemoveGpu_v2", gpu); r != kSuccess) return r;
  if (f.removed.contains(gpu)) return kErrorNotFound;
  // Processes, or persistence mode, hold the GPU: the driver refuses and the GPU stays draining.
  const auto& node_gpu = f.node.gpus[gpu];
  const auto p = f.persistence.find(gpu);
  const bool persistent = p != f.persistence.end() ? p->second != 0 : node_gpu.persistence_mode;
  if (!node_gpu.processes.empty() || persistent) return kErrorInUse;
  if (!f.drained.contains(gpu)) return kErrorInUse;  // not drained first: a new client may attach
  f.removed.insert(gpu);
  return kSuccess;
}

FAKE_API Return nvmlDeviceDiscoverGpus(PciInfo* pci) {
  Call c("nvmlDeviceDiscoverGpus");
  if (c.rc != kSuccess) return c.rc;
  if (pci == nullptr) return kErrorInvalidArgument;
  Fake& f = fake();
  const bool all = pci->domain == 0 && pci->bus == 0 && pci->device == 0;
  for (size_t i = 0; i < f.node.gpus.size(); ++i) {
    const auto gpu = static_cast<unsigned>(i);
    if (!all && (f.node.gpus[i].domain != pci->domain || f.node.gpus[i].bus != pci->bus)) continue;
    if (const Return r = f.fault("nvmlDeviceDiscoverGpus", gpu); r != kSuccess) return r;
    if (f.removed.erase(gpu) > 0) {
      f.drained.erase(gpu);
      ++f.resets[gpu];
      // A pending MIG mode change takes effect with the reset.
      auto& g = f.node.gpus[gpu];
      if (g.mig_pending != g.mig_enabled && g.mig.empty()) {
        g.mig_enabled = g.mig_pending;
        f.mig_changed(gpu);
      }
    }
  }
  return kSuccess;
}
