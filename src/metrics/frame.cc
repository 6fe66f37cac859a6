#include "metrics/frame.h"

#include <fmt/format.h>

#include <algorithm>

#include "metrics/exposition.h"

namespace kgpu::metrics {

namespace {

struct LabelOptions {
  const std::string* hostname;  // null: no Hostname label (dcgm-exporter -n)
  const std::string* driver;    // null unless DCGM_FI_DRIVER_VERSION is enabled
  bool old_namespace = false;
  const std::map<std::pair<std::string, std::string>, PodMeta>* pod_meta = nullptr;
};

using LabelList = std::vector<std::pair<std::string_view, std::string_view>>;

void append_labels(std::string& out, LabelList& labels) {
  std::sort(labels.begin(), labels.end());
  for (const auto& [k, v] : labels) exposition::label(out, k, v);
}

const PodMeta* meta_of(const PodRef& p, const LabelOptions& o) {
  if (o.pod_meta == nullptr) return nullptr;
  auto it = o.pod_meta->find({p.ns, p.pod});
  return it == o.pod_meta->end() ? nullptr : &it->second;
}

// gpu, UUID, pci_bus_id, device, modelName[, GPU_I_PROFILE, GPU_I_ID][, Hostname]
void identity_labels(std::string& out, const DeviceIdentity& d, const LabelOptions& o) {
  out += fmt::format(R"(gpu="{}",{}="{}",pci_bus_id="{}",device="nvidia{}",modelName="{}")", d.gpu,
                     o.old_namespace ? "uuid" : "UUID", exposition::escape_label_value(d.uuid),
                     exposition::escape_label_value(d.pci_bus_id), d.gpu, exposition::escape_label_value(d.model));
  if (d.gi_profile) out += fmt::format(R"(,GPU_I_PROFILE="{}",GPU_I_ID="{}")", *d.gi_profile, d.gi_id.value_or(0));
  if (o.hostname != nullptr) out += fmt::format(R"(,Hostname="{}")", exposition::escape_label_value(*o.hostname));
}

// The identity labels, then [DCGM_FI_DRIVER_VERSION] (kgpu's own families).
void device_labels(std::string& out, const DeviceIdentity& d, const LabelOptions& o) {
  identity_labels(out, d, o);
  if (o.driver != nullptr) exposition::label(out, "DCGM_FI_DRIVER_VERSION", *o.driver);
}

// container, namespace, pod[, pod_uid] (kgpu's own families).
void pod_labels(std::string& out, const PodRef& p, const LabelOptions& o) {
  exposition::label(out, o.old_namespace ? "container_name" : "container", p.container);
  exposition::label(out, o.old_namespace ? "pod_namespace" : "namespace", p.ns);
  exposition::label(out, o.old_namespace ? "pod_name" : "pod", p.pod);
  if (const PodMeta* m = meta_of(p, o); m != nullptr && !m->uid.empty()) exposition::label(out, "pod_uid", m->uid);
}

// One DCGM series' labels in dcgm-exporter's order: the identity labels; then, sorted by name, the
// field labels (DCGM_FI_DRIVER_VERSION, the pod's labels, `extra`); then, sorted by name, the
// attributes (container, namespace, pod, pod_uid, `attrs`).
void series_labels(std::string& out, const DeviceIdentity& d, const PodRef* pod, const LabelOptions& o,
                   LabelList extra = {}, LabelList attrs = {}) {
  identity_labels(out, d, o);
  const PodMeta* meta = pod != nullptr ? meta_of(*pod, o) : nullptr;
  if (o.driver != nullptr) extra.emplace_back("DCGM_FI_DRIVER_VERSION", *o.driver);
  if (pod != nullptr) {
    attrs.emplace_back(o.old_namespace ? "container_name" : "container", pod->container);
    attrs.emplace_back(o.old_namespace ? "pod_namespace" : "namespace", pod->ns);
    attrs.emplace_back(o.old_namespace ? "pod_name" : "pod", pod->pod);
    if (meta != nullptr && !meta->uid.empty()) attrs.emplace_back("pod_uid", meta->uid);
  }
  if (meta != nullptr) {
    const size_t fixed = extra.size();
    for (const auto& [k, v] : meta->labels) {
      // A label of the series wins over a pod label of the same name (dcgm-exporter drops the pod's;
      // it would print a name twice for an identity label, which Prometheus rejects).
      auto same = [&](const auto& l) { return l.first == k; };
      constexpr std::string_view kIdentity[] = {"gpu",       "UUID",          "uuid",     "pci_bus_id", "device",
                                                "modelName", "GPU_I_PROFILE", "GPU_I_ID", "Hostname"};
      if (std::none_of(attrs.begin(), attrs.end(), same) && std::none_of(extra.begin(), extra.begin() + fixed, same) &&
          std::find(std::begin(kIdentity), std::end(kIdentity), k) == std::end(kIdentity)) {
        extra.emplace_back(k, v);
      }
    }
  }
  append_labels(out, extra);
  append_labels(out, attrs);
}

void header(std::string& out, std::string_view name, std::string_view help, std::string_view type) {
  exposition::family(out, name, type, help);
}

// dcgm-exporter's names for the clock event reason bits (DCGM_CLOCKS_EVENT_REASON_*).
struct ClockEvent {
  uint64_t bit;
  const char* name;
};
constexpr ClockEvent kClockEvents[] = {
    {0x1, "gpu_idle"},    {0x2, "clocks_setting"},  {0x4, "power_cap"},
    {0x8, "hw_slowdown"}, {0x10, "sync_boost"},     {0x20, "sw_thermal"},
    {0x40, "hw_thermal"}, {0x80, "hw_power_brake"}, {0x100, "display_clocks"},
};

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

const char* clock_event_name(uint64_t bit) {
  for (const auto& e : kClockEvents) {
    if (e.bit == bit) return e.name;
  }
  return nullptr;
}

std::string render(const std::vector<Counter>& counters, const Frame& f) {
  std::string out;
  out.reserve(4096 + f.devices.size() * 3072);
  bool driver_label = false;
  for (const auto& c : counters) driver_label = driver_label || c.type == MetricType::kLabel;
  const LabelOptions opts{f.style.hostname ? &f.hostname : nullptr, driver_label ? &f.driver_version : nullptr,
                          f.style.old_namespace, f.pod_meta.empty() ? nullptr : &f.pod_meta};
  // The devices that carry DCGM series: a MIG-enabled GPU's instances stand for it.
  auto shown = [&](const DeviceSample& d) { return !d.telemetry.lost && (!d.mig_parent || f.mig_parent_series); };

  for (const auto& c : counters) {
    if (c.type == MetricType::kLabel) continue;
    const std::string_view name = c.name;
    std::string body;
    auto open_series = [&] {
      body += name;
      body += '{';
    };
    auto close_series = [&](const std::string& value) {
      body += "} ";
      body += value;
      body += '\n';
    };
    if (c.exporter != ExporterField::kNone) {
      // dcgm-exporter's windowed counts: one series per (device, code or reason) seen in the
      // window, or one series with 0 and no code label when none was.
      const bool xid = c.exporter == ExporterField::kXidErrorsCount;
      const std::string window = std::to_string(xid ? f.xid_window_ms : f.clock_events_window_ms);
      const auto& by_gpu = xid ? f.xid_window : f.clock_event_window;
      for (const auto& d : f.devices) {
        if (!shown(d)) continue;
        const PodRef* pod = d.owner ? &*d.owner : nullptr;
        const auto it = by_gpu.find(d.id.gpu);
        bool any = false;
        if (it != by_gpu.end()) {
          for (const auto& [key, n] : it->second) {
            std::string code;
            if (xid) {
              code = std::to_string(key);
            } else if (const char* reason = clock_event_name(key)) {
              code = reason;
            } else {
              continue;
            }
            any = true;
            open_series();
            series_labels(body, d.id, pod, opts, {{"window_size_in_ms", window}, {xid ? "xid" : "clock_event", code}});
            close_series(std::to_string(n));
          }
        }
        if (!any) {
          open_series();
          series_labels(body, d.id, pod, opts, {{"window_size_in_ms", window}});
          close_series("0");
        }
      }
    } else {
      const bool xid_errors = std::string_view(c.field->name) == "DCGM_FI_DEV_XID_ERRORS";
      for (const auto& d : f.devices) {
        if (!shown(d)) continue;
        auto v = c.field->read(d.telemetry, d.history);
        if (!v) continue;
        const PodRef* pod = d.owner ? &*d.owner : nullptr;
        open_series();
        if (xid_errors) {
          // dcgm-exporter names the XID in err_code and err_msg.
          const long long code = v->is_double ? static_cast<long long>(v->d) : v->i;
          const std::string code_text = std::to_string(code);
          series_labels(body, d.id, pod, opts, {}, {{"err_code", code_text}, {"err_msg", xid_message(code)}});
        } else {
          series_labels(body, d.id, pod, opts);
        }
        close_series(format_value(*v));
      }
      // Containers sharing a GPU: their own utilization and memory, from per-process data.
      const bool util = c.field->name == std::string_view("DCGM_FI_DEV_GPU_UTIL");
      const bool used = c.field->name == std::string_view("DCGM_FI_DEV_FB_USED");
      if (util || used) {
        for (const auto& u : f.containers) {
          if (util && !u.sm_util_pct) continue;
          open_series();
          series_labels(body, u.device, &u.pod, opts);
          close_series(util ? fmt::format("{}", static_cast<long long>(*u.sm_util_pct + 0.5))
                            : fmt::format("{}", u.memory_mib));
        }
      }
    }
    if (body.empty()) continue;  // no GPU provides it: no family at all
    header(out, name, c.help, metric_type_name(c.type));
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
      pod_labels(out, a.pod, opts);
      out += "} 1\n";
    }
  }
  if (!f.containers.empty()) {
    header(out, "kgpu_container_gpu_processes", "Compute processes of a container on a shared GPU.", "gauge");
    for (const auto& u : f.containers) {
      out += "kgpu_container_gpu_processes{";
      device_labels(out, u.device, opts);
      pod_labels(out, u.pod, opts);
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
