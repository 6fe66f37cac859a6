// Entry points that find devices and describe them: count, handles, index, name, UUID, serial,
// PCI, architecture, compute capability, NUMA node, and framebuffer memory.
#include <algorithm>
#include <string>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// ---- devices ----

FAKE_API Return nvmlDeviceGetCount_v2(unsigned int* count) {
  Call c("nvmlDeviceGetCount_v2");
  if (c.rc != kSuccess) return c.rc;
  if (count == nullptr) return kErrorInvalidArgument;
  *count = static_cast<unsigned>(fake().node.gpus.size());
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetHandleByIndex_v2(unsigned int index, Device* device) {
  Call c("nvmlDeviceGetHandleByIndex_v2");
  if (c.rc != kSuccess) return c.rc;
  Fake& f = fake();
  if (device == nullptr || index >= f.node.gpus.size()) return kErrorInvalidArgument;
  if (auto r = f.fault("nvmlDeviceGetHandleByIndex_v2", index); r != kSuccess) return r;
  if (f.is_lost(index)) return kErrorGpuIsLost;
  *device = reinterpret_cast<Device>(f.gpu_handles[index]);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetHandleByUUID(const char* uuid, Device* device) {
  Call c("nvmlDeviceGetHandleByUUID");
  if (c.rc != kSuccess) return c.rc;
  if (uuid == nullptr || device == nullptr) return kErrorInvalidArgument;
  Fake& f = fake();
  for (size_t i = 0; i < f.node.gpus.size(); ++i) {
    if (f.node.gpus[i].uuid == uuid) {
      *device = reinterpret_cast<Device>(f.gpu_handles[i]);
      return f.is_lost(static_cast<unsigned>(i)) ? kErrorGpuIsLost : kSuccess;
    }
    for (size_t k = 0; k < f.node.gpus[i].mig.size(); ++k) {
      if (f.node.gpus[i].mig[k].has_ci && f.node.gpus[i].mig[k].uuid == uuid) {
        *device = reinterpret_cast<Device>(f.mig_handles[i][k]);
        return kSuccess;
      }
    }
  }
  return kErrorNotFound;
}

FAKE_API Return nvmlDeviceGetIndex(Device d, unsigned int* index) {
  Call c("nvmlDeviceGetIndex", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (index == nullptr) return kErrorInvalidArgument;
  *index = c.index;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetName(Device d, char* name, unsigned int length) {
  Call c("nvmlDeviceGetName", d, true);
  if (c.rc != kSuccess) return c.rc;
  std::string n = c.gpu->model->name;
  if (c.mig != nullptr) {
    n += " MIG " + kgpu::gpu::mig::profile_name(c.mig->shape->compute_slices, c.mig->profile->memory_mib,
                                                c.mig->shape->media_engines);
  }
  copy_string(n, name, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlDeviceGetUUID(Device d, char* uuid, unsigned int length) {
  Call c("nvmlDeviceGetUUID", d, true);
  if (c.rc != kSuccess) return c.rc;
  copy_string(c.mig != nullptr ? c.mig->uuid : c.gpu->uuid, uuid, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlDeviceGetSerial(Device d, char* serial, unsigned int length) {
  Call c("nvmlDeviceGetSerial", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  copy_string(c.gpu->serial, serial, length, c.rc);
  return c.rc;
}

FAKE_API Return nvmlDeviceGetPciInfo_v3(Device d, PciInfo* pci) {
  Call c("nvmlDeviceGetPciInfo_v3", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (pci == nullptr) return kErrorInvalidArgument;
  fill_pci(*c.gpu, pci);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMinorNumber(Device d, unsigned int* minor) {
  Call c("nvmlDeviceGetMinorNumber", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (minor == nullptr) return kErrorInvalidArgument;
  *minor = c.gpu->minor;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetArchitecture(Device d, unsigned int* arch) {
  Call c("nvmlDeviceGetArchitecture", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (arch == nullptr) return kErrorInvalidArgument;
  *arch = c.gpu->model->architecture;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetBrand(Device d, unsigned int* type) {
  Call c("nvmlDeviceGetBrand", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (type == nullptr) return kErrorInvalidArgument;
  // Current drivers report data-center GPUs (T4 to B200) as NVML_BRAND_NVIDIA.
  *type = kgpu::nvml::kBrandNvidia;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetCudaComputeCapability(Device d, int* major, int* minor) {
  Call c("nvmlDeviceGetCudaComputeCapability", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (major == nullptr || minor == nullptr) return kErrorInvalidArgument;
  *major = c.gpu->model->cc_major;
  *minor = c.gpu->model->cc_minor;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetNumaNodeId(Device d, unsigned int* node) {
  Call c("nvmlDeviceGetNumaNodeId", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (node == nullptr) return kErrorInvalidArgument;
  *node = c.gpu->numa;
  return kSuccess;
}

// Framebuffer of a GPU or MIG instance, in MiB: total, reserved, used.
struct Framebuffer {
  uint64_t total, reserved, used;
};
Framebuffer framebuffer(const Call& c) {
  uint64_t total, reserved, used;
  if (c.mig != nullptr) {
    total = c.mig->profile->memory_mib;
    reserved = 0;
    used = mig_used_mib(*c.gpu, *c.mig);
  } else {
    total = c.gpu->model->memory_mib;
    reserved = c.gpu->model->reserved_mib;
    used = gpu_used_mib(*c.gpu);
  }
  return {total, reserved, std::min(used, total - reserved)};
}

FAKE_API Return nvmlDeviceGetMemoryInfo_v2(Device d, MemoryV2* memory) {
  Call c("nvmlDeviceGetMemoryInfo_v2", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (memory == nullptr) return kErrorInvalidArgument;
  if (memory->version != kMemoryV2Version) return kErrorArgumentVersionMismatch;
  const Framebuffer fb = framebuffer(c);
  memory->total = fb.total << 20;
  memory->reserved = fb.reserved << 20;
  memory->used = fb.used << 20;
  memory->free = (fb.total - fb.reserved - fb.used) << 20;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMemoryInfo(Device d, Memory* memory) {
  Call c("nvmlDeviceGetMemoryInfo", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (memory == nullptr) return kErrorInvalidArgument;
  const Framebuffer fb = framebuffer(c);
  memory->total = fb.total << 20;
  memory->free = (fb.total - fb.reserved - fb.used) << 20;
  memory->used = (fb.used + fb.reserved) << 20;  // v1 counts the driver's reservation as used
  return kSuccess;
}
