// Conversions from the simulated node to NVML's C types: saturating numbers, caller buffers,
// PCI info, framebuffer use, error texts.
#include <cstdio>
#include <cstring>

#include "fake_nvml.h"

namespace kgpu::fake_nvml {

unsigned to_uint(double v) { return v <= 0 ? 0u : v >= 4294967295.0 ? 4294967295u : static_cast<unsigned>(v); }
unsigned long long to_ull(double v) {
  return v <= 0 ? 0ull : v >= 1.8e19 ? 18000000000000000000ull : static_cast<unsigned long long>(v);
}

void copy_string(const std::string& s, char* buf, unsigned length, Return& rc) {
  if (buf == nullptr) {
    rc = kErrorInvalidArgument;
    return;
  }
  if (s.size() + 1 > length) {
    rc = kErrorInsufficientSize;
    return;
  }
  std::memcpy(buf, s.c_str(), s.size() + 1);
}

void fill_pci(const Gpu& g, PciInfo* pci) {
  std::memset(pci, 0, sizeof *pci);
  const auto bus = g.bus_id();
  std::snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:00.0", g.domain & 0xffff, g.bus);
  std::snprintf(pci->busId, sizeof pci->busId, "%s", bus.c_str());
  pci->domain = g.domain;
  pci->bus = g.bus;
  pci->device = 0;
  pci->pciDeviceId = (g.model->pci_device_id << 16) | 0x10DE;
  pci->pciSubSystemId = g.model->pci_subsystem_id;
}

uint64_t mig_used_mib(const Gpu& g, const MigInstance& m) {
  uint64_t used = 0;
  for (const auto& p : g.processes) {
    if (p.gpu_instance_id == m.gpu_instance_id) used += p.used_memory_mib;
  }
  return used;
}

uint64_t gpu_used_mib(const Gpu& g) {
  uint64_t used = g.base_used_mib;
  for (const auto& p : g.processes) used += p.used_memory_mib;
  return used;
}

std::string error_text(Return r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kErrorUninitialized:
      return "Uninitialized";
    case kErrorInvalidArgument:
      return "Invalid Argument";
    case kErrorNotSupported:
      return "Not Supported";
    case kErrorNoPermission:
      return "Insufficient Permissions";
    case kErrorNotFound:
      return "Not Found";
    case kErrorInsufficientSize:
      return "Insufficient Size";
    case kErrorDriverNotLoaded:
      return "Driver Not Loaded";
    case kErrorTimeout:
      return "Timeout";
    case kErrorGpuIsLost:
      return "GPU is lost";
    case kErrorLibRmVersionMismatch:
      return "Driver/library version mismatch";
    default:
      return return_name(r);
  }
}

}  // namespace kgpu::fake_nvml
