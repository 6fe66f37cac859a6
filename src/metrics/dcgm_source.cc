#include "metrics/dcgm_source.h"

#include "common/log.h"

namespace kgpu::metrics {

std::vector<unsigned short> profiling_fields(const std::vector<Counter>& counters) {
  std::vector<unsigned short> out;
  for (const auto& c : counters) {
    if (c.field == nullptr) continue;
    if (const unsigned short id = dcgm::profiling_field_id(c.field->name); id != 0) out.push_back(id);
  }
  return out;
}

std::unique_ptr<dcgm::Profiler> start_profiling(const DcgmOptions& options, const std::vector<Counter>& counters,
                                                const gpu::Inventory& inv, std::chrono::milliseconds interval,
                                                Clock* clock) {
  const auto wanted = profiling_fields(counters);
  // Nothing NVML leaves out: GPM covers every wanted field on every GPU.
  if (dcgm::missing_fields_message(inv, wanted, "").empty()) return nullptr;
  if (!options.enabled) {
    log::warn(dcgm::missing_fields_message(inv, wanted, "turned off with --dcgm=off"));
    return nullptr;
  }
  dcgm::ProfilerOptions po;
  po.library = options.library;
  po.remote = options.remote;
  po.fields = wanted;
  po.interval = interval;
  po.retry = options.retry;
  po.clock = clock;
  auto p = std::make_unique<dcgm::Profiler>(po);
  if (p->start()) return p;
  log::warn(dcgm::missing_fields_message(inv, wanted, p->problem()));
  if (!p->may_recover()) return nullptr;
  return p;
}

}  // namespace kgpu::metrics
