// Entry points for the topology between GPUs and NVLink state.
#include <cstdio>
#include <cstring>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// ---- topology ----

FAKE_API Return nvmlDeviceGetTopologyCommonAncestor(Device a, Device b, int* level) {
  Call ca("nvmlDeviceGetTopologyCommonAncestor", a, true, false);
  if (ca.rc != kSuccess) return ca.rc;
  if (b == nullptr || level == nullptr) return kErrorInvalidArgument;
  auto* hb = reinterpret_cast<Handle*>(b);
  Fake& f = fake();
  if (hb->gpu >= f.node.gpus.size() || hb->mig >= 0) return kErrorInvalidArgument;
  if (f.is_lost(hb->gpu)) return kErrorGpuIsLost;
  *level = f.node.topology_level(ca.index, hb->gpu);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetNvLinkState(Device d, unsigned int link, int* active) {
  Call c("nvmlDeviceGetNvLinkState", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->nvlinks == 0) return kErrorNotSupported;
  if (active == nullptr || link >= c.gpu->nvlink_remote.size()) return kErrorInvalidArgument;
  *active = c.gpu->nvlink_remote[link].empty() ? 0 : 1;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetNvLinkRemotePciInfo_v2(Device d, unsigned int link, PciInfo* pci) {
  Call c("nvmlDeviceGetNvLinkRemotePciInfo_v2", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->nvlinks == 0) return kErrorNotSupported;
  if (pci == nullptr || link >= c.gpu->nvlink_remote.size()) return kErrorInvalidArgument;
  const auto& remote = c.gpu->nvlink_remote[link];
  if (remote.empty()) return kErrorNotFound;
  std::memset(pci, 0, sizeof *pci);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", remote.c_str());
  unsigned dom = 0, bus = 0, dev = 0, fn = 0;
  std::sscanf(remote.c_str(), "%x:%x:%x.%x", &dom, &bus, &dev, &fn);
  pci->domain = dom;
  pci->bus = bus;
  pci->device = dev;
  return kSuccess;
}
