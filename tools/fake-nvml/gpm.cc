// Entry points for GPU performance monitoring (GPM) samples and metrics.
#include <algorithm>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// ---- GPM ----

FAKE_API Return nvmlGpmQueryDeviceSupport(Device d, GpmSupport* support) {
  Call c("nvmlGpmQueryDeviceSupport", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (support == nullptr) return kErrorInvalidArgument;
  if (support->version != kGpmSupportVersion) return kErrorArgumentVersionMismatch;
  support->isSupportedDevice = c.gpu->model->gpm ? 1 : 0;
  return kSuccess;
}

FAKE_API Return nvmlGpmSampleAlloc(GpmSample* sample) {
  Call c("nvmlGpmSampleAlloc");
  if (c.rc != kSuccess) return c.rc;
  if (sample == nullptr) return kErrorInvalidArgument;
  *sample = reinterpret_cast<GpmSample>(new GpmSampleImpl());
  return kSuccess;
}

FAKE_API Return nvmlGpmSampleFree(GpmSample sample) {
  delete reinterpret_cast<GpmSampleImpl*>(sample);
  return kSuccess;
}

FAKE_API Return nvmlGpmSampleGet(Device d, GpmSample sample) {
  Call c("nvmlGpmSampleGet", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (!c.gpu->model->gpm) return kErrorNotSupported;
  auto* s = reinterpret_cast<GpmSampleImpl*>(sample);
  if (s == nullptr) return kErrorInvalidArgument;
  s->gpu = static_cast<int>(c.index);
  s->gi = -1;
  s->t = c.now();
  return kSuccess;
}

FAKE_API Return nvmlGpmMigSampleGet(Device d, unsigned gpuInstanceId, GpmSample sample) {
  Call c("nvmlGpmMigSampleGet", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (!c.gpu->model->gpm || !c.gpu->mig_enabled) return kErrorNotSupported;
  auto* s = reinterpret_cast<GpmSampleImpl*>(sample);
  if (s == nullptr) return kErrorInvalidArgument;
  const auto& mig = c.gpu->mig;
  if (std::none_of(mig.begin(), mig.end(), [&](const auto& m) { return m.gpu_instance_id == gpuInstanceId; })) {
    return kErrorNotFound;
  }
  s->gpu = static_cast<int>(c.index);
  s->gi = gpuInstanceId;
  s->t = c.now();
  return kSuccess;
}

FAKE_API Return nvmlGpmMetricsGet(GpmMetricsGet* get) {
  Call c("nvmlGpmMetricsGet");
  if (c.rc != kSuccess) return c.rc;
  if (get == nullptr || get->version != kGpmMetricsGetVersion || get->numMetrics > kGpmMetricsMax) {
    return kErrorInvalidArgument;
  }
  auto* s1 = reinterpret_cast<GpmSampleImpl*>(get->sample1);
  auto* s2 = reinterpret_cast<GpmSampleImpl*>(get->sample2);
  if (s1 == nullptr || s2 == nullptr || s1->gpu < 0 || s1->gpu != s2->gpu || s1->gi != s2->gi || s2->t <= s1->t)
    return kErrorInvalidArgument;
  Fake& f = fake();
  if (static_cast<size_t>(s1->gpu) >= f.node.gpus.size()) return kErrorInvalidArgument;
  const auto& g = f.node.gpus[s1->gpu];
  const kgpu::fake::Telemetry* instance = nullptr;
  if (s1->gi >= 0) {
    for (const auto& m : g.mig) {
      if (m.gpu_instance_id == s1->gi) instance = &m.telemetry;
    }
    if (instance == nullptr) return kErrorInvalidArgument;  // the instance went away between the samples
  }
  // An instance's readings are its own (0 when not given); the GPU's fall back to gpuUtil.
  const auto& tel = instance != nullptr ? *instance : g.telemetry;
  const double gr_fallback = instance != nullptr ? 0 : tel.at("gpuUtil", s2->t, 0);
  for (unsigned i = 0; i < get->numMetrics; ++i) {
    auto& m = get->metrics[i];
    m.nvmlReturn = kSuccess;
    switch (m.metricId) {
      case kGpmGraphicsUtil:
        m.value = tel.at("grEngineActive", s2->t, gr_fallback);
        break;
      case kGpmAnyTensorUtil:
        m.value = tel.at("tensorActive", s2->t, 0);
        break;
      case kGpmDramBwUtil:
        m.value = tel.at("dramActive", s2->t, 0);
        break;
      case kGpmPcieTxPerSec:
        m.value = tel.at("pcieTxMiBps", s2->t, 0);
        break;
      case kGpmPcieRxPerSec:
        m.value = tel.at("pcieRxMiBps", s2->t, 0);
        break;
      default:
        m.nvmlReturn = kErrorNotSupported;
        m.value = 0;
    }
  }
  return kSuccess;
}
