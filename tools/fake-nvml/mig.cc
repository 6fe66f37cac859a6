// Entry points for MIG: mode, MIG device handles, GPU instances, profiles and attributes.
#include <cstring>
#include <string>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// ---- MIG ----

FAKE_API Return nvmlDeviceGetMigMode(Device d, unsigned int* current, unsigned int* pending) {
  Call c("nvmlDeviceGetMigMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (current == nullptr || pending == nullptr) return kErrorInvalidArgument;
  *current = c.gpu->mig_enabled ? kMigEnable : kMigDisable;
  *pending = c.gpu->mig_pending ? kMigEnable : kMigDisable;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMaxMigDeviceCount(Device d, unsigned int* count) {
  Call c("nvmlDeviceGetMaxMigDeviceCount", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (count == nullptr) return kErrorInvalidArgument;
  *count = kgpu::gpu::mig::kComputeSlices;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetMigDeviceHandleByIndex(Device d, unsigned int index, Device* mig) {
  Call c("nvmlDeviceGetMigDeviceHandleByIndex", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (mig == nullptr || index >= kgpu::gpu::mig::kComputeSlices) return kErrorInvalidArgument;
  if (!c.gpu->mig_enabled) return kErrorNotFound;
  // The MIG devices are the instances with a compute instance, in order.
  unsigned seen = 0;
  for (size_t k = 0; k < c.gpu->mig.size(); ++k) {
    if (!c.gpu->mig[k].has_ci) continue;
    if (seen++ == index) {
      *mig = reinterpret_cast<Device>(fake().mig_handles[c.index][k]);
      return kSuccess;
    }
  }
  return kErrorNotFound;
}

FAKE_API Return nvmlDeviceGetDeviceHandleFromMigDeviceHandle(Device d, Device* parent) {
  Call c("nvmlDeviceGetDeviceHandleFromMigDeviceHandle", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || parent == nullptr) return kErrorInvalidArgument;
  *parent = reinterpret_cast<Device>(fake().gpu_handles[c.index]);
  return kSuccess;
}

FAKE_API Return nvmlDeviceIsMigDeviceHandle(Device d, unsigned int* is_mig) {
  Call c("nvmlDeviceIsMigDeviceHandle", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (is_mig == nullptr) return kErrorInvalidArgument;
  *is_mig = c.mig != nullptr ? 1 : 0;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetGpuInstanceId(Device d, unsigned int* id) {
  Call c("nvmlDeviceGetGpuInstanceId", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr) return kErrorNotSupported;
  if (id == nullptr) return kErrorInvalidArgument;
  *id = c.mig->gpu_instance_id;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetComputeInstanceId(Device d, unsigned int* id) {
  Call c("nvmlDeviceGetComputeInstanceId", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr) return kErrorNotSupported;
  if (id == nullptr) return kErrorInvalidArgument;
  *id = c.mig->compute_instance_id;
  return kSuccess;
}

namespace {
const kgpu::fake::MigProfileSpec* model_profile(const Gpu& g, const kgpu::gpu::mig::Shape& shape) {
  for (const auto& p : g.model->mig) {
    if (std::string(p.shape) == shape.key) return &p;
  }
  return nullptr;
}
}  // namespace

FAKE_API Return nvmlDeviceGetGpuInstanceProfileInfo(Device d, unsigned int profile, GpuInstanceProfileInfo* info) {
  Call c("nvmlDeviceGetGpuInstanceProfileInfo", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (info == nullptr || profile >= kGpuInstanceProfileCount) return kErrorInvalidArgument;
  const auto* shape = kgpu::gpu::mig::shape_by_index(profile);
  const auto* p = shape != nullptr ? model_profile(*c.gpu, *shape) : nullptr;
  if (p == nullptr) return kErrorNotSupported;
  *info = GpuInstanceProfileInfo{shape->profile_id,
                                 0,
                                 shape->compute_slices,
                                 shape->max_instances,
                                 p->sm_count,
                                 p->copy_engines,
                                 p->decoders,
                                 p->encoders,
                                 p->jpegs,
                                 p->ofas,
                                 p->memory_mib};
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetGpuInstances(Device d, unsigned int profile_id, GpuInstance* instances,
                                          unsigned int* count) {
  Call c("nvmlDeviceGetGpuInstances", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (!c.gpu->mig_enabled) return kErrorInvalidState;
  if (instances == nullptr || count == nullptr) return kErrorInvalidArgument;
  unsigned n = 0;
  for (size_t k = 0; k < c.gpu->mig.size(); ++k) {
    if (c.gpu->mig[k].shape->profile_id != profile_id) continue;
    instances[n++] = reinterpret_cast<GpuInstance>(fake().mig_handles[c.index][k]);
  }
  *count = n;
  return kSuccess;
}

FAKE_API Return nvmlGpuInstanceGetInfo(GpuInstance gi, GpuInstanceInfo* info) {
  Call c("nvmlGpuInstanceGetInfo", reinterpret_cast<Device>(gi), true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || info == nullptr) return kErrorInvalidArgument;
  info->device = reinterpret_cast<Device>(fake().gpu_handles[c.index]);
  info->id = c.mig->gpu_instance_id;
  info->profileId = c.mig->shape->profile_id;
  info->placement = {c.mig->start, c.mig->shape->memory_slices};
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetAttributes_v2(Device d, DeviceAttributes* a) {
  Call c("nvmlDeviceGetAttributes_v2", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (a == nullptr) return kErrorInvalidArgument;
  std::memset(a, 0, sizeof *a);
  if (c.mig != nullptr) {
    const auto& p = *c.mig->profile;
    *a = DeviceAttributes{p.sm_count,
                          p.copy_engines,
                          p.decoders,
                          p.encoders,
                          p.jpegs,
                          p.ofas,
                          c.mig->shape->compute_slices,
                          c.mig->shape->compute_slices,
                          p.memory_mib};
    return kSuccess;
  }
  return kErrorNotSupported;  // real drivers answer only for MIG device handles
}
