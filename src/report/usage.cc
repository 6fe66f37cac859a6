#include "report/usage.h"

#include <fmt/format.h>

#include <cmath>

#include "prom/client.h"

namespace kgpu::cost {

namespace {

using Key = std::tuple<std::string, std::string, std::string, std::string, std::string, std::string>;

std::string first_label(const prom::Series& s, const char* renamed, const char* plain) {
  const std::string& r = s.label(renamed);
  return r.empty() ? s.label(plain) : r;
}

Key key_of(const prom::Series& s) {
  return {first_label(s, "exported_namespace", "namespace"),
          first_label(s, "exported_pod", "pod"),
          first_label(s, "exported_container", "container"),
          s.label("Hostname"),
          s.label("UUID"),
          s.label("GPU_I_ID")};
}

std::string seconds(double s) { return fmt::format("{}s", static_cast<int64_t>(std::llround(s))); }

}  // namespace

UsageQueries usage_queries(const UsageOptions& o) {
  const std::string u = "(DCGM_FI_DEV_GPU_UTIL or 100 * DCGM_FI_PROF_GR_ENGINE_ACTIVE)";
  const std::string w = seconds(o.window_s), s = seconds(o.step_s);
  const std::string t = fmt::format("{}", o.idle_threshold);
  const std::string sub = fmt::format("[{}:{}]", w, s);
  UsageQueries q;
  q.held = fmt::format("count_over_time({}{})", u, sub);
  q.idle = fmt::format("count_over_time(({} < {}){})", u, t, sub);
  q.mean = fmt::format("avg_over_time({}{})", u, sub);
  q.last_active = fmt::format("max_over_time(timestamp({} >= {}){})", u, t, sub);
  q.first_seen = fmt::format("min_over_time(timestamp({}){})", u, sub);
  q.peak_memory = fmt::format("max_over_time(DCGM_FI_DEV_FB_USED[{}])", w);
  q.memory_size = fmt::format("max_over_time((DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE){})", sub);
  return q;
}

double Usage::device_memory(const std::string& node, const std::string& uuid, const std::string& mig_id) const {
  const auto it = memory_by_device.find({node, uuid, mig_id});
  return it == memory_by_device.end() ? -1 : it->second;
}

Result<Usage> collect_usage(const prom::Client& client, const UsageOptions& o) {
  if (!(o.until > 0) || !(o.window_s > 0) || !(o.step_s > 0) || o.step_s > o.window_s) {
    return fail(ErrorCode::kInvalidArgument, "usage window: needs an end time, a window and 0 < step <= window");
  }
  const UsageQueries q = usage_queries(o);
  Usage usage;
  usage.options = o;
  std::map<Key, DeviceUsage> devices;
  auto device = [&](const prom::Series& s) -> DeviceUsage& {
    const Key k = key_of(s);
    auto [it, added] = devices.try_emplace(k);
    if (added) {
      auto& d = it->second;
      std::tie(d.ns, d.pod, d.container, d.node, d.uuid, d.mig_id) = k;
      d.gpu = s.label("gpu");
      d.model = s.label("modelName");
      d.mig_profile = s.label("GPU_I_PROFILE");
    }
    return it->second;
  };
  using Apply = void (*)(DeviceUsage&, double);
  const std::pair<const std::string*, Apply> figures[] = {
      {&q.held, [](DeviceUsage& d, double v) { d.held_samples = static_cast<int>(v); }},
      {&q.idle, [](DeviceUsage& d, double v) { d.idle_samples = static_cast<int>(v); }},
      {&q.mean, [](DeviceUsage& d, double v) { d.mean_util = v; }},
      {&q.last_active, [](DeviceUsage& d, double v) { d.last_active = v; }},
      {&q.first_seen, [](DeviceUsage& d, double v) { d.first_seen = v; }},
      {&q.peak_memory, [](DeviceUsage& d, double v) { d.peak_fb_mib = v; }},
  };
  for (const auto& [query, apply] : figures) {
    auto r = client.query(*query, o.until);
    if (!r) return std::unexpected(r.error());
    for (const auto& w : r->warnings) usage.warnings.push_back(fmt::format("query '{}': {}", *query, w));
    for (const auto& s : r->series) {
      if (s.samples.empty() || std::isnan(s.samples[0].v)) continue;
      apply(device(s), s.samples[0].v);
    }
  }
  auto sizes = client.query(q.memory_size, o.until);
  if (!sizes) return std::unexpected(sizes.error());
  for (const auto& s : sizes->series) {
    if (s.samples.empty() || !(s.samples[0].v > 0)) continue;
    auto& m = usage.memory_by_device[{s.label("Hostname"), s.label("UUID"), s.label("GPU_I_ID")}];
    m = std::max(m, s.samples[0].v);
  }
  usage.devices.reserve(devices.size());
  for (auto& [k, d] : devices) {
    d.fb_total_mib = usage.device_memory(d.node, d.uuid, d.mig_id);
    usage.devices.push_back(std::move(d));
  }
  return usage;
}

}  // namespace kgpu::cost
