// Entry points for the processes running on a GPU or MIG instance and their utilization.
#include <algorithm>
#include <vector>

#include "fake_nvml.h"

using namespace kgpu::fake_nvml;

// ---- processes ----

FAKE_API Return nvmlDeviceGetComputeRunningProcesses_v3(Device d, unsigned int* count, ProcessInfo* infos) {
  Call c("nvmlDeviceGetComputeRunningProcesses_v3", d, true);
  if (c.rc != kSuccess) return c.rc;
  if (count == nullptr) return kErrorInvalidArgument;
  std::vector<ProcessInfo> list;
  for (const auto& p : c.gpu->processes) {
    if (c.mig != nullptr && p.gpu_instance_id != c.mig->gpu_instance_id) continue;
    ProcessInfo pi{};
    pi.pid = p.pid;
    pi.usedGpuMemory = p.used_memory_mib << 20;
    pi.gpuInstanceId = p.gpu_instance_id ? *p.gpu_instance_id : kInstanceIdNone;
    pi.computeInstanceId = p.gpu_instance_id ? p.compute_instance_id : kInstanceIdNone;
    list.push_back(pi);
  }
  if (*count < list.size()) {
    *count = static_cast<unsigned>(list.size());
    return kErrorInsufficientSize;
  }
  if (!list.empty() && infos == nullptr) return kErrorInvalidArgument;
  std::copy(list.begin(), list.end(), infos);
  *count = static_cast<unsigned>(list.size());
  return kSuccess;
}

FAKE_API Return nvmlDeviceGetProcessUtilization(Device d, ProcessUtilizationSample* samples, unsigned int* count,
                                                unsigned long long last_seen_us) {
  Call c("nvmlDeviceGetProcessUtilization", d, true, false);
  if (c.rc != kSuccess) return c.rc;
  if (c.gpu->mig_enabled) return kErrorNotSupported;
  if (count == nullptr) return kErrorInvalidArgument;
  // One sample per process per whole second, stamped with that second.
  const double t = c.now();
  const unsigned long long stamp = static_cast<unsigned long long>(t) * 1000000ULL + 1;
  std::vector<ProcessUtilizationSample> list;
  if (stamp > last_seen_us) {
    for (const auto& p : c.gpu->processes) {
      list.push_back({p.pid, stamp, to_uint(p.sm_util.at(t)), to_uint(p.mem_util.at(t)), to_uint(p.enc_util.at(t)),
                      to_uint(p.dec_util.at(t))});
    }
  }
  if (list.empty()) return kErrorNotFound;
  if (samples == nullptr || *count < list.size()) {
    *count = static_cast<unsigned>(list.size());
    return kErrorInsufficientSize;
  }
  std::copy(list.begin(), list.end(), samples);
  *count = static_cast<unsigned>(list.size());
  return kSuccess;
}
