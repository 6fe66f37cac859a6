// Entry points that change MIG: the mode, GPU instances (with placement) and their compute
// instances. The real geometry rules (src/gpu/mig.h) decide what fits; failures answer as NVML
// does: NOT_SUPPORTED on a model without MIG (or a profile it lacks), INVALID_STATE with MIG off,
// INSUFFICIENT_RESOURCES when an instance does not fit, IN_USE when processes or compute instances
// hold what is destroyed or a mode change needs the GPU idle. `faults.calls` injects failures
// (with `after`, midway through a sequence). Changes are kept over reloads of the node file.
//
// The fake serves compute instances that span their GPU instance only (the form mig-parted's
// `<g>g.<mem>gb` profiles create); smaller compute-instance profiles answer NOT_SUPPORTED.
#include <algorithm>
#include <set>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

namespace {

const kgpu::fake::MigProfileSpec* model_profile(const Gpu& g, const kgpu::gpu::mig::Shape& shape) {
  for (const auto& p : g.model->mig) {
    if (std::string(p.shape) == shape.key) return &p;
  }
  return nullptr;
}

bool processes_on(const Gpu& g, std::optional<unsigned> gpu_instance_id) {
  return std::any_of(g.processes.begin(), g.processes.end(), [&](const auto& p) {
    return !gpu_instance_id || (p.gpu_instance_id && *p.gpu_instance_id == *gpu_instance_id);
  });
}

// Compute slices of compute-instance profile `profile` (NVML_COMPUTE_INSTANCE_PROFILE_*), 0 if unknown.
unsigned ci_slices(unsigned profile) {
  static constexpr unsigned kSlices[kComputeInstanceProfileCount] = {1, 2, 3, 4, 7, 8, 6, 1};
  return profile < kComputeInstanceProfileCount ? kSlices[profile] : 0;
}

// The compute-instance profile index that spans an instance of `slices` compute slices.
unsigned full_ci_profile(unsigned slices) {
  for (unsigned p = 0; p < kComputeInstanceProfileCount; ++p) {
    if (ci_slices(p) == slices && p != kComputeInstanceProfile1SliceRev1) return p;
  }
  return 0;
}

}  // namespace

FAKE_API Return nvmlDeviceSetMigMode(Device d, unsigned int mode, Return* activation) {
  Call c("nvmlDeviceSetMigMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (activation == nullptr || (mode != kMigEnable && mode != kMigDisable)) return kErrorInvalidArgument;
  const bool enable = mode == kMigEnable;
  // MIG instances must be destroyed before MIG is switched off.
  if (!enable && !c.gpu->mig.empty()) return kErrorInUse;
  c.gpu->mig_pending = enable;
  if (c.gpu->mig_enabled == enable) {
    *activation = kSuccess;
  } else if (processes_on(*c.gpu, std::nullopt)) {
    *activation = kErrorInUse;  // pending until the GPU is reset with nothing on it
  } else {
    c.gpu->mig_enabled = enable;
    *activation = kSuccess;
  }
  fake().mig_changed(c.index);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetGpuInstancePossiblePlacements_v2(Device d, unsigned int profile_id,
                                                              GpuInstancePlacement* placements, unsigned int* count) {
  Call c("nvmlDeviceGetGpuInstancePossiblePlacements_v2", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (count == nullptr) return kErrorInvalidArgument;
  const auto* shape = kgpu::gpu::mig::shape_by_profile_id(profile_id);
  if (shape == nullptr || model_profile(*c.gpu, *shape) == nullptr) return kErrorNotSupported;
  if (placements == nullptr) {
    *count = static_cast<unsigned>(shape->starts.size());
    return kSuccess;
  }
  if (*count < shape->starts.size()) {
    *count = static_cast<unsigned>(shape->starts.size());
    return kErrorInsufficientSize;
  }
  for (size_t i = 0; i < shape->starts.size(); ++i) placements[i] = {shape->starts[i], shape->memory_slices};
  *count = static_cast<unsigned>(shape->starts.size());
  return kSuccess;
}

FAKE_API Return nvmlDeviceCreateGpuInstanceWithPlacement(Device d, unsigned int profile_id,
                                                         const GpuInstancePlacement* placement, GpuInstance* out) {
  Call c("nvmlDeviceCreateGpuInstanceWithPlacement", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->model->mig.empty()) return kErrorNotSupported;
  if (placement == nullptr || out == nullptr) return kErrorInvalidArgument;
  if (!c.gpu->mig_enabled) return kErrorInvalidState;
  const auto* shape = kgpu::gpu::mig::shape_by_profile_id(profile_id);
  const auto* profile = shape != nullptr ? model_profile(*c.gpu, *shape) : nullptr;
  if (profile == nullptr) return kErrorNotSupported;
  if (placement->size != shape->memory_slices ||
      std::find(shape->starts.begin(), shape->starts.end(), placement->start) == shape->starts.end()) {
    return kErrorInvalidArgument;
  }
  std::vector<std::pair<const kgpu::gpu::mig::Shape*, std::optional<unsigned>>> requests;
  for (const auto& m : c.gpu->mig) requests.emplace_back(m.shape, m.start);
  requests.emplace_back(shape, placement->start);
  if (!kgpu::gpu::mig::place(requests)) return kErrorInsufficientResources;
  std::set<unsigned> ids;
  for (const auto& m : c.gpu->mig) ids.insert(m.gpu_instance_id);
  MigInstance m;
  m.shape = shape;
  m.profile = profile;
  m.start = placement->start;
  m.gpu_instance_id = shape->compute_slices == kgpu::gpu::mig::kComputeSlices ? 0 : 1;
  while (ids.contains(m.gpu_instance_id)) ++m.gpu_instance_id;
  m.uuid = mig_uuid(c.gpu->uuid, m.gpu_instance_id);
  m.has_ci = false;
  c.gpu->mig.push_back(std::move(m));
  Fake& f = fake();
  f.mig_changed(c.index);
  *out = reinterpret_cast<GpuInstance>(f.mig_handles[c.index].back());
  return kSuccess;
}

FAKE_API Return nvmlGpuInstanceDestroy(GpuInstance gi) {
  Call c("nvmlGpuInstanceDestroy", reinterpret_cast<Device>(gi), true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr) return kErrorInvalidArgument;
  if (c.mig->has_ci || processes_on(*c.gpu, c.mig->gpu_instance_id)) return kErrorInUse;
  const unsigned id = c.mig->gpu_instance_id;
  std::erase_if(c.gpu->mig, [&](const MigInstance& m) { return m.gpu_instance_id == id; });
  fake().mig_changed(c.index);
  return kSuccess;
}

FAKE_API Return nvmlGpuInstanceGetComputeInstanceProfileInfo(GpuInstance gi, unsigned int profile,
                                                             unsigned int eng_profile,
                                                             ComputeInstanceProfileInfo* info) {
  Call c("nvmlGpuInstanceGetComputeInstanceProfileInfo", reinterpret_cast<Device>(gi), true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || info == nullptr || eng_profile != kComputeInstanceEngineProfileShared ||
      profile >= kComputeInstanceProfileCount) {
    return kErrorInvalidArgument;
  }
  const unsigned slices = ci_slices(profile);
  const unsigned gi_slices = c.mig->shape->compute_slices;
  if (slices == 0 || slices > gi_slices || profile == kComputeInstanceProfile1SliceRev1) return kErrorNotSupported;
  const auto& p = *c.mig->profile;
  *info = ComputeInstanceProfileInfo{profile,     slices,   gi_slices / slices, p.sm_count * slices / gi_slices,
                                     p.copy_engines, p.decoders, p.encoders,     p.jpegs,
                                     p.ofas};
  return kSuccess;
}

FAKE_API Return nvmlGpuInstanceCreateComputeInstance(GpuInstance gi, unsigned int profile_id, ComputeInstance* out) {
  Call c("nvmlGpuInstanceCreateComputeInstance", reinterpret_cast<Device>(gi), true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || out == nullptr) return kErrorInvalidArgument;
  if (profile_id >= kComputeInstanceProfileCount || ci_slices(profile_id) > c.mig->shape->compute_slices) {
    return kErrorInvalidArgument;
  }
  if (ci_slices(profile_id) != c.mig->shape->compute_slices) return kErrorNotSupported;
  if (c.mig->has_ci) return kErrorInsufficientResources;
  const unsigned id = c.mig->gpu_instance_id;
  c.mig->has_ci = true;
  c.mig->compute_instance_id = 0;
  Fake& f = fake();
  f.mig_changed(c.index);
  for (size_t k = 0; k < c.gpu->mig.size(); ++k) {
    if (c.gpu->mig[k].gpu_instance_id == id) *out = reinterpret_cast<ComputeInstance>(f.mig_handles[c.index][k]);
  }
  return kSuccess;
}

FAKE_API Return nvmlGpuInstanceGetComputeInstances(GpuInstance gi, unsigned int profile_id, ComputeInstance* out,
                                                   unsigned int* count) {
  Call c("nvmlGpuInstanceGetComputeInstances", reinterpret_cast<Device>(gi), true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || out == nullptr || count == nullptr) return kErrorInvalidArgument;
  *count = 0;
  if (c.mig->has_ci && profile_id == full_ci_profile(c.mig->shape->compute_slices)) {
    out[0] = reinterpret_cast<ComputeInstance>(gi);
    *count = 1;
  }
  return kSuccess;
}

FAKE_API Return nvmlComputeInstanceDestroy(ComputeInstance ci) {
  Call c("nvmlComputeInstanceDestroy", reinterpret_cast<Device>(ci), true);
  if (c.rc != kSuccess) return c.rc;
  if (c.mig == nullptr || !c.mig->has_ci) return kErrorInvalidArgument;
  if (processes_on(*c.gpu, c.mig->gpu_instance_id)) return kErrorInUse;
  c.mig->has_ci = false;
  fake().mig_changed(c.index);
  return kSuccess;
}
