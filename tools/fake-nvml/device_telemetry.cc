// Entry points for a GPU's changing readings: utilization, temperature, power and energy, clocks,
// PCIe replays, row remapping, ECC, field values, modes and clock event reasons.
#include <cstring>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// Device-level readings; MIG handles and MIG-enabled GPUs answer NOT_SUPPORTED where NVML does.
FAKE_API Return nvmlDeviceGetUtilizationRates(Device d, Utilization* u) {
  Call c("nvmlDeviceGetUtilizationRates", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->mig_enabled) return kErrorNotSupported;
  if (u == nullptr) return kErrorInvalidArgument;
  u->gpu = to_uint(c.gpu->telemetry.at("gpuUtil", c.now(), 0));
  u->memory = to_uint(c.gpu->telemetry.at("memCopyUtil", c.now(), 0));
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetEncoderUtilization(Device d, unsigned int* util, unsigned int* period) {
  Call c("nvmlDeviceGetEncoderUtilization", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (util == nullptr || period == nullptr) return kErrorInvalidArgument;
  *util = to_uint(c.gpu->telemetry.at("encUtil", c.now(), 0));
  *period = 167000;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetDecoderUtilization(Device d, unsigned int* util, unsigned int* period) {
  Call c("nvmlDeviceGetDecoderUtilization", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (util == nullptr || period == nullptr) return kErrorInvalidArgument;
  *util = to_uint(c.gpu->telemetry.at("decUtil", c.now(), 0));
  *period = 167000;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetTemperature(Device d, int sensor, unsigned int* temp) {
  Call c("nvmlDeviceGetTemperature", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (sensor != kTemperatureGpu || temp == nullptr) return kErrorInvalidArgument;
  *temp = to_uint(c.gpu->telemetry.at("gpuTemp", c.now(), 34));
  return kSuccess;
}

double power_w(const Call& c) { return c.gpu->telemetry.at("powerW", c.now(), c.gpu->model->idle_power_w); }

// Energy since load: the starting value plus the integral of the power reading.
unsigned long long energy_mj(const Gpu& g, double t) {
  return to_ull(g.telemetry.at("energyStartMJ", 0, 1.0e9) +
                1000.0 * g.telemetry.integral("powerW", t, g.model->idle_power_w));
}

FAKE_API Return nvmlDeviceGetPowerUsage(Device d, unsigned int* mw) {
  Call c("nvmlDeviceGetPowerUsage", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mw == nullptr) return kErrorInvalidArgument;
  *mw = to_uint(power_w(c) * 1000.0);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetPowerManagementLimit(Device d, unsigned int* mw) {
  Call c("nvmlDeviceGetPowerManagementLimit", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mw == nullptr) return kErrorInvalidArgument;
  *mw = c.gpu->model->power_limit_w * 1000;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetTotalEnergyConsumption(Device d, unsigned long long* mj) {
  Call c("nvmlDeviceGetTotalEnergyConsumption", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mj == nullptr) return kErrorInvalidArgument;
  // Energy since load at the current power draw, on top of a starting value.
  *mj = energy_mj(*c.gpu, c.now());
  return kSuccess;
}

// Current (telemetry, defaulting to idle) or maximum clock of a clock domain.
Return clock_mhz(const char* fn, Device d, int type, unsigned int* mhz, bool current) {
  Call c(fn, d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mhz == nullptr) return kErrorInvalidArgument;
  const auto& m = *c.gpu->model;
  switch (type) {
    case kClockGraphics:
    case kClockSm:
      *mhz = current ? to_uint(c.gpu->telemetry.at("smClock", c.now(), m.max_sm_clock_mhz / 6)) : m.max_sm_clock_mhz;
      return kSuccess;
    case kClockMem:
      *mhz = current ? to_uint(c.gpu->telemetry.at("memClock", c.now(), m.max_mem_clock_mhz)) : m.max_mem_clock_mhz;
      return kSuccess;
    case kClockVideo:
      *mhz = m.max_sm_clock_mhz * 3 / 4;
      return kSuccess;
    default:
      return kErrorInvalidArgument;
  }
}

FAKE_API Return nvmlDeviceGetClockInfo(Device d, int type, unsigned int* mhz) {
  return clock_mhz("nvmlDeviceGetClockInfo", d, type, mhz, true);
}

FAKE_API Return nvmlDeviceGetMaxClockInfo(Device d, int type, unsigned int* mhz) {
  return clock_mhz("nvmlDeviceGetMaxClockInfo", d, type, mhz, false);
}

FAKE_API Return nvmlDeviceGetPcieReplayCounter(Device d, unsigned int* value) {
  Call c("nvmlDeviceGetPcieReplayCounter", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (value == nullptr) return kErrorInvalidArgument;
  *value = to_uint(c.gpu->telemetry.at("pcieReplay", c.now(), 0));
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetRemappedRows(Device d, unsigned int* corr, unsigned int* unc, unsigned int* pending,
                                          unsigned int* failure) {
  Call c("nvmlDeviceGetRemappedRows", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (!c.gpu->model->row_remapping || c.gpu->mig_enabled) return kErrorNotSupported;
  if (!corr || !unc || !pending || !failure) return kErrorInvalidArgument;
  const auto& t = c.gpu->telemetry;
  *corr = to_uint(t.at("remappedCorrectable", c.now(), 0));
  *unc = to_uint(t.at("remappedUncorrectable", c.now(), 0));
  *pending = t.at("remapPending", c.now(), 0) != 0 ? 1 : 0;
  *failure = t.at("remapFailure", c.now(), 0) != 0 ? 1 : 0;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetTotalEccErrors(Device d, int error_type, int counter_type, unsigned long long* count) {
  Call c("nvmlDeviceGetTotalEccErrors", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (count == nullptr || error_type < 0 || error_type > 1 || counter_type < 0 || counter_type > 1) {
    return kErrorInvalidArgument;
  }
  static const char* keys[2][2] = {{"eccSbeVolatile", "eccSbeAggregate"}, {"eccDbeVolatile", "eccDbeAggregate"}};
  *count = to_ull(c.gpu->telemetry.at(keys[error_type][counter_type], c.now(), 0));
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetFieldValues(Device d, int count, FieldValue* values) {
  Call c("nvmlDeviceGetFieldValues", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (values == nullptr || count < 0) return kErrorInvalidArgument;
  const double t = c.now();
  const auto& tel = c.gpu->telemetry;
  const auto& m = *c.gpu->model;
  for (int i = 0; i < count; ++i) {
    FieldValue& v = values[i];
    v.timestamp = static_cast<long long>(t * 1e6);
    v.latencyUsec = 0;
    v.nvmlReturn = kSuccess;
    switch (v.fieldId) {
      case kFieldMemoryTemp:
        if (!m.hbm) {
          v.nvmlReturn = kErrorNotSupported;
          break;
        }
        v.valueType = kValueUInt;
        v.value.uiVal = to_uint(tel.at("memoryTemp", t, 38));
        break;
      case kFieldNvLinkThroughputDataTx:
      case kFieldNvLinkThroughputDataRx: {
        if (m.nvlinks == 0) {
          v.nvmlReturn = kErrorNotSupported;
          break;
        }
        const char* key = v.fieldId == kFieldNvLinkThroughputDataTx ? "nvlinkTxKiBps" : "nvlinkRxKiBps";
        v.valueType = kValueULongLong;
        v.value.ullVal = to_ull(tel.integral(key, t, 0));
        break;
      }
      case kFieldTotalEnergyConsumption:
        v.valueType = kValueULongLong;
        v.value.ullVal = energy_mj(*c.gpu, t);
        break;
      case kFieldPowerInstant:
        v.valueType = kValueUInt;
        v.value.uiVal = to_uint(power_w(c) * 1000.0);
        break;
      case kFieldGpuRecoveryAction:
        v.valueType = kValueUInt;
        v.value.uiVal = to_uint(tel.at("recoveryAction", t, 0));
        break;
      case kFieldPcieReplayCounter:
        v.valueType = kValueULongLong;
        v.value.ullVal = to_ull(tel.at("pcieReplay", t, 0));
        break;
      default:
        v.nvmlReturn = kErrorNotSupported;
    }
  }
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetComputeMode(Device d, int* mode) {
  Call c("nvmlDeviceGetComputeMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mode == nullptr) return kErrorInvalidArgument;
  *mode = kComputeModeDefault;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetPersistenceMode(Device d, int* enabled) {
  Call c("nvmlDeviceGetPersistenceMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (enabled == nullptr) return kErrorInvalidArgument;
  const auto it = fake().persistence.find(c.index);
  *enabled = it != fake().persistence.end() ? it->second : (c.gpu->persistence_mode ? 1 : 0);
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetVirtualizationMode(Device d, int* mode) {
  Call c("nvmlDeviceGetVirtualizationMode", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (mode == nullptr) return kErrorInvalidArgument;
  *mode = c.gpu->virtualization_mode;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetGpuFabricInfo(Device d, GpuFabricInfo* info) {
  Call c("nvmlDeviceGetGpuFabricInfo", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (info == nullptr) return kErrorInvalidArgument;
  if (!c.gpu->fabric) return kErrorNotSupported;
  const auto& f = *c.gpu->fabric;
  std::memcpy(info->clusterUuid, f.cluster_uuid, sizeof info->clusterUuid);
  info->status = f.status;
  info->cliqueId = f.clique_id;
  info->state = f.state;
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetCurrentClocksEventReasons(Device d, unsigned long long* reasons) {
  Call c("nvmlDeviceGetCurrentClocksEventReasons", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (reasons == nullptr) return kErrorInvalidArgument;
  *reasons = to_ull(c.gpu->telemetry.at("clockEventReasons", c.now(), 1));
  return kSuccess;
}
