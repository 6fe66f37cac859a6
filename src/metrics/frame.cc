#include "metrics/frame.h"

#include <fmt/format.h>

#include "metrics/exposition.h"

namespace kgpu::metrics {

namespace {

struct LabelOptions {
  const std::string* hostname;
  const std::string* driver;  // null unless DCGM_FI_DRIVER_VERSION is enabled
};

// gpu, UUID, pci_bus_id, device, modelName[, GPU_I_PROFILE, GPU_I_ID], Hostname[, DCGM_FI_DRIVER_VERSION]
void device_labels(std::string& out, const DeviceIdentity& d, const LabelOptions& o) {
  out += fmt::format(R"(gpu="{}",UUID="{}",pci_bus_id="{}",device="nvidia{}",modelName="{}")", d.gpu,
                     exposition::escape_label_value(d.uuid), exposition::escape_label_value(d.pci_bus_id), d.gpu, exposition::escape_label_value(d.model));
  if (d.gi_profile) out += fmt::format(R"(,GPU_I_PROFILE="{}",GPU_I_ID="{}")", *d.gi_profile, d.gi_id.value_or(0));
  out += fmt::format(R"(,Hostname="{}")", exposition::escape_label_value(*o.hostname));
  if (o.driver != nullptr) out += fmt::format(R"(,DCGM_FI_DRIVER_VERSION="{}")", exposition::escape_label_value(*o.driver));
}

void pod_labels(std::string& out, const PodRef& p) {
  out += fmt::format(R"(,container="{}",namespace="{}",pod="{}")", exposition::escape_label_value(p.container), exposition::escape_label_value(p.ns),
                     exposition::escape_label_value(p.pod));
}

void header(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  exposition::family(out, name, type, help);
}

// Clock event reason bits (nvmlClocksEventReasons) worth alerting on.
struct Reason {
  unsigned long long bit;
  const char* name;
};
constexpr Reason kThrottleReasons[] = {
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x20, "sw_thermal_slowdown"},
    {0x40, "hw_thermal_slowdown"},
    {0x80, "hw_power_brake_slowdown"},
};

}  // namespace

std::string render(const std::vector<Counter>& counters, const Frame& f) {
  std::string out;
  out.reserve(4096 + f.devices.size() * 3072);
  bool driver_label = false;
  for (const auto& c : counters) driver_label = driver_label || c.type == MetricType::kLabel;
  const LabelOptions opts{&f.hostname, driver_label ? &f.driver_version : nullptr};

  for (const auto& c : counters) {
    if (c.type == MetricType::kLabel) continue;
    const std::string_view name = c.field->name;
    std::string body;
    for (const auto& d : f.devices) {
      if (d.telemetry.lost) continue;
      auto v = c.field->read(d.telemetry, d.history);
      if (!v) continue;
      body += c.field->name;
      body += '{';
      device_labels(body, d.id, opts);
      if (d.owner) pod_labels(body, *d.owner);
      body += "} ";
      body += format_value(*v);
      body += '\n';
    }
    // Containers sharing a GPU: their own utilization and memory, from per-process data.
    const bool util = name == "DCGM_FI_DEV_GPU_UTIL";
    const bool used = name == "DCGM_FI_DEV_FB_USED";
    if (util || used) {
      for (const auto& u : f.containers) {
        if (util && !u.sm_util_pct) continue;
        body += c.field->name;
        body += '{';
        device_labels(body, u.device, opts);
        pod_labels(body, u.pod);
        body += "} ";
        body +=
            util ? fmt::format("{}", static_cast<long long>(*u.sm_util_pct + 0.5)) : fmt::format("{}", u.memory_mib);
        body += '\n';
      }
    }
    if (body.empty()) continue;  // no GPU provides it: no family at all
    header(out, c.field->name, c.help, metric_type_name(c.type));
    out += body;
  }

  // kgpu's own families.
  if (!f.gpu_up.empty()) {
    header(out, "kgpu_gpu_up", "1 if the GPU answers NVML, 0 if it is lost or failing.", "gauge");
    for (const auto& [gpu, up] : f.gpu_up) {
      auto it = f.gpu_identity.find(gpu);
      if (it == f.gpu_identity.end()) continue;
      out += "kgpu_gpu_up{";
      device_labels(out, it->second, opts);
      out += fmt::format("}} {}\n", up ? 1 : 0);
    }
  }
  if (!f.gpu_identity.empty()) {
    // One series per GPU from the start, so increase() sees the first XID too.
    header(out, "kgpu_xid_events_total", "XID events since the agent started, by GPU.", "counter");
    for (const auto& [gpu, id] : f.gpu_identity) {
      uint64_t n = 0;
      for (const auto& [key, count] : f.xid_counts) n += key.first == gpu ? count : 0;
      out += "kgpu_xid_events_total{";
      device_labels(out, id, opts);
      out += fmt::format("}} {}\n", n);
    }
  }
  if (!f.xid_counts.empty()) {
    header(out, "kgpu_xid_errors_total", "XID events since the agent started, by GPU and XID code.", "counter");
    for (const auto& [key, n] : f.xid_counts) {
      auto it = f.gpu_identity.find(key.first);
      if (it == f.gpu_identity.end()) continue;
      out += "kgpu_xid_errors_total{";
      device_labels(out, it->second, opts);
      out += fmt::format(R"(,xid="{}"}} {})", key.second, n);
      out += '\n';
    }
  }
  std::string pending, throttle;
  for (const auto& d : f.devices) {
    if (d.telemetry.lost || d.id.gi_profile) continue;
    if (d.telemetry.remap_pending) {
      pending += "kgpu_row_remap_pending{";
      device_labels(pending, d.id, opts);
      pending += fmt::format("}} {}\n", *d.telemetry.remap_pending ? 1 : 0);
    }
    if (d.telemetry.clock_event_reasons) {
      for (const auto& r : kThrottleReasons) {
        throttle += "kgpu_clock_event_reason_active{";
        device_labels(throttle, d.id, opts);
        throttle += fmt::format(R"(,reason="{}"}} {})", r.name, (*d.telemetry.clock_event_reasons & r.bit) ? 1 : 0);
        throttle += '\n';
      }
    }
  }
  if (!pending.empty()) {
    header(out, "kgpu_row_remap_pending", "1 if remapped rows are pending a GPU reset.", "gauge");
    out += pending;
  }
  if (!throttle.empty()) {
    header(out, "kgpu_clock_event_reason_active", "1 while the GPU's clocks are held down for this reason.", "gauge");
    out += throttle;
  }
  if (!f.allocations.empty()) {
    header(out, "kgpu_device_allocated", "1 for each device the kubelet assigned to a container (PodResources).",
           "gauge");
    for (const auto& a : f.allocations) {
      out += "kgpu_device_allocated{";
      device_labels(out, a.device, opts);
      out += fmt::format(R"(,resource="{}",device_id="{}")", exposition::escape_label_value(a.resource), exposition::escape_label_value(a.device_id));
      pod_labels(out, a.pod);
      out += "} 1\n";
    }
  }
  if (!f.containers.empty()) {
    header(out, "kgpu_container_gpu_processes", "Compute processes of a container on a shared GPU.", "gauge");
    for (const auto& u : f.containers) {
      out += "kgpu_container_gpu_processes{";
      device_labels(out, u.device, opts);
      pod_labels(out, u.pod);
      out += fmt::format("}} {}\n", u.processes);
    }
  }
  const auto& s = f.stats;
  header(out, "kgpu_samples_total", "NVML samples taken by the agent.", "counter");
  out += fmt::format("kgpu_samples_total {}\n", s.samples);
  header(out, "kgpu_sample_duration_seconds", "Duration of the last NVML sample.", "gauge");
  out += fmt::format("kgpu_sample_duration_seconds {:f}\n", s.last_sample_seconds);
  header(out, "kgpu_last_sample_timestamp_seconds", "Unix time of the last NVML sample.", "gauge");
  out += fmt::format("kgpu_last_sample_timestamp_seconds {:f}\n", s.last_sample_unix);
  header(out, "kgpu_nvml_errors_total", "NVML calls that failed (other than not supported), by call.", "counter");
  for (const auto& [call, n] : s.nvml_errors) out += fmt::format("kgpu_nvml_errors_total{{call=\"{}\"}} {}\n", call, n);
  header(out, "kgpu_pod_resources_errors_total", "Failed kubelet PodResources List calls.", "counter");
  out += fmt::format("kgpu_pod_resources_errors_total {}\n", s.pod_resources_errors);
  header(out, "kgpu_pod_resources_up", "1 if the last kubelet PodResources List call succeeded.", "gauge");
  out += fmt::format("kgpu_pod_resources_up {}\n", s.pod_resources_up ? 1 : 0);
  return out;
}

}  // namespace kgpu::metrics
