#include "metrics/counters.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

#include "common/strings.h"

namespace kgpu::metrics {

namespace {

using gpu::Telemetry;

template <typename T>
std::optional<Value> as_int(const std::optional<T>& v) {
  if (!v) return std::nullopt;
  return Value::integer(static_cast<long long>(*v));
}

std::optional<Value> as_real(const std::optional<double>& v, double scale = 1.0) {
  if (!v) return std::nullopt;
  return Value::real(*v * scale);
}

// A profiling field read through DCGM (Telemetry::prof_fields, by DCGM field id).
std::optional<Value> dcgm_field(const Telemetry& t, unsigned short id) {
  const auto it = t.prof_fields.find(id);
  if (it == t.prof_fields.end()) return std::nullopt;
  return Value::real(it->second);
}

// The 26 enabled lines of dcgm-exporter's default-counters.csv.
constexpr const char* kDefaultCounters[] = {
    "DCGM_FI_DEV_SM_CLOCK",
    "DCGM_FI_DEV_MEM_CLOCK",
    "DCGM_FI_DEV_MEMORY_TEMP",
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_MEM_COPY_UTIL",
    "DCGM_FI_DEV_ENC_UTIL",
    "DCGM_FI_DEV_DEC_UTIL",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_RESERVED",
    "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
    "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DRIVER_VERSION",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
    "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES",
    "DCGM_FI_PROF_PCIE_RX_BYTES",
};

// dcgm-exporter 1.x names (its 1.x-compatibility-metrics.csv) and the DCGM fields they stand for.
struct Legacy {
  const char* legacy;
  const char* field;
};
constexpr Legacy kLegacyNames[] = {
    {"dcgm_sm_clock", "DCGM_FI_DEV_SM_CLOCK"},
    {"dcgm_memory_clock", "DCGM_FI_DEV_MEM_CLOCK"},
    {"dcgm_memory_temp", "DCGM_FI_DEV_MEMORY_TEMP"},
    {"dcgm_gpu_temp", "DCGM_FI_DEV_GPU_TEMP"},
    {"dcgm_power_usage", "DCGM_FI_DEV_POWER_USAGE"},
    {"dcgm_total_energy_consumption", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"},
    {"dcgm_pcie_tx_throughput", "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"},
    {"dcgm_pcie_rx_throughput", "DCGM_FI_DEV_PCIE_RX_THROUGHPUT"},
    {"dcgm_pcie_replay_counter", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER"},
    {"dcgm_gpu_utilization", "DCGM_FI_DEV_GPU_UTIL"},
    {"dcgm_mem_copy_utilization", "DCGM_FI_DEV_MEM_COPY_UTIL"},
    {"dcgm_enc_utilization", "DCGM_FI_DEV_ENC_UTIL"},
    {"dcgm_dec_utilization", "DCGM_FI_DEV_DEC_UTIL"},
    {"dcgm_xid_errors", "DCGM_FI_DEV_XID_ERRORS"},
    {"dcgm_power_violation", "DCGM_FI_DEV_POWER_VIOLATION"},
    {"dcgm_thermal_violation", "DCGM_FI_DEV_THERMAL_VIOLATION"},
    {"dcgm_sync_boost_violation", "DCGM_FI_DEV_SYNC_BOOST_VIOLATION"},
    {"dcgm_board_limit_violation", "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION"},
    {"dcgm_low_util_violation", "DCGM_FI_DEV_LOW_UTIL_VIOLATION"},
    {"dcgm_reliability_violation", "DCGM_FI_DEV_RELIABILITY_VIOLATION"},
    {"dcgm_fb_free", "DCGM_FI_DEV_FB_FREE"},
    {"dcgm_fb_used", "DCGM_FI_DEV_FB_USED"},
    {"dcgm_ecc_sbe_volatile_total", "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL"},
    {"dcgm_ecc_dbe_volatile_total", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"},
    {"dcgm_ecc_sbe_aggregate_total", "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL"},
    {"dcgm_ecc_dbe_aggregate_total", "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL"},
    {"dcgm_retired_pages_sbe", "DCGM_FI_DEV_RETIRED_SBE"},
    {"dcgm_retired_pages_dbe", "DCGM_FI_DEV_RETIRED_DBE"},
    {"dcgm_retired_pages_pending", "DCGM_FI_DEV_RETIRED_PENDING"},
    {"dcgm_nvlink_flit_crc_error_count_total", "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL"},
    {"dcgm_nvlink_data_crc_error_count_total", "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL"},
    {"dcgm_nvlink_replay_error_count_total", "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL"},
    {"dcgm_nvlink_recovery_error_count_total", "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL"},
    {"dcgm_nvlink_bandwidth_total", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"},
    {"dcgm_fi_prof_gr_engine_active", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"},
    {"dcgm_fi_prof_sm_active", "DCGM_FI_PROF_SM_ACTIVE"},
    {"dcgm_fi_prof_sm_occupancy", "DCGM_FI_PROF_SM_OCCUPANCY"},
    {"dcgm_fi_prof_pipe_tensor_active", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"},
    {"dcgm_fi_prof_dram_active", "DCGM_FI_PROF_DRAM_ACTIVE"},
    {"dcgm_fi_prof_pcie_tx_bytes", "DCGM_FI_PROF_PCIE_TX_BYTES"},
    {"dcgm_fi_prof_pcie_rx_bytes", "DCGM_FI_PROF_PCIE_RX_BYTES"},
};

// dcgm-exporter's DCGM_EXP_* fields: those kgpu computes, and those it has no source for.
struct ExporterName {
  const char* name;
  ExporterField field;
  const char* missing;  // why kgpu cannot provide it; null when it can
};
constexpr ExporterName kExporterNames[] = {
    {"DCGM_EXP_XID_ERRORS_COUNT", ExporterField::kXidErrorsCount, nullptr},
    {"DCGM_EXP_CLOCK_EVENTS_COUNT", ExporterField::kClockEventsCount, nullptr},
    {"DCGM_EXP_GPU_HEALTH_STATUS", ExporterField::kNone,
     "it is DCGM's health-check verdict, which NVML has no equivalent for"},
    {"DCGM_EXP_P2P_STATUS", ExporterField::kNone, "NVML's P2P status per GPU pair is not read by kgpu"},
};

}  // namespace

const char* legacy_field_name(std::string_view name) {
  for (const auto& l : kLegacyNames) {
    if (name == l.legacy) return l.field;
  }
  return nullptr;
}

const char* metric_type_name(MetricType t) {
  switch (t) {
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kCounter:
      return "counter";
    case MetricType::kLabel:
      return "label";
  }
  return "gauge";
}

std::string format_value(const Value& v) { return v.is_double ? fmt::format("{:f}", v.d) : fmt::format("{}", v.i); }

const std::vector<Field>& fields() {
  using H = DeviceHistory;
  static const std::vector<Field> kFields = {
      {"DCGM_FI_DEV_SM_CLOCK", MetricType::kGauge, "SM clock frequency (in MHz).",
       [](const Telemetry& t, const H&) { return as_int(t.sm_clock_mhz); }},
      {"DCGM_FI_DEV_MEM_CLOCK", MetricType::kGauge, "Memory clock frequency (in MHz).",
       [](const Telemetry& t, const H&) { return as_int(t.mem_clock_mhz); }},
      {"DCGM_FI_DEV_MEMORY_TEMP", MetricType::kGauge, "Memory temperature (in C).",
       [](const Telemetry& t, const H&) { return as_int(t.memory_temp_c); }},
      {"DCGM_FI_DEV_GPU_TEMP", MetricType::kGauge, "GPU temperature (in C).",
       [](const Telemetry& t, const H&) { return as_int(t.gpu_temp_c); }},
      {"DCGM_FI_DEV_POWER_USAGE", MetricType::kGauge, "Power draw (in W).",
       [](const Telemetry& t, const H&) { return as_real(t.power_w); }},
      {"DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", MetricType::kCounter, "Total energy consumption since boot (in mJ).",
       [](const Telemetry& t, const H&) { return as_int(t.energy_mj); }},
      {"DCGM_FI_DEV_PCIE_REPLAY_COUNTER", MetricType::kCounter, "Total number of PCIe retries.",
       [](const Telemetry& t, const H&) { return as_int(t.pcie_replay); }},
      {"DCGM_FI_DEV_GPU_UTIL", MetricType::kGauge, "GPU utilization (in %).",
       [](const Telemetry& t, const H&) { return as_int(t.gpu_util_pct); }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", MetricType::kGauge, "Memory utilization (in %).",
       [](const Telemetry& t, const H&) { return as_int(t.mem_copy_util_pct); }},
      {"DCGM_FI_DEV_ENC_UTIL", MetricType::kGauge, "Encoder utilization (in %).",
       [](const Telemetry& t, const H&) { return as_int(t.enc_util_pct); }},
      {"DCGM_FI_DEV_DEC_UTIL", MetricType::kGauge, "Decoder utilization (in %).",
       [](const Telemetry& t, const H&) { return as_int(t.dec_util_pct); }},
      {"DCGM_FI_DEV_XID_ERRORS", MetricType::kGauge, "Value of the last XID error encountered.",
       [](const Telemetry&, const H& h) -> std::optional<Value> {
         return Value::integer(static_cast<long long>(h.last_xid.value_or(0)));
       }},
      {"DCGM_FI_DEV_FB_FREE", MetricType::kGauge, "Framebuffer memory free (in MiB).",
       [](const Telemetry& t, const H&) { return as_int(t.fb_free_mib); }},
      {"DCGM_FI_DEV_FB_USED", MetricType::kGauge, "Framebuffer memory used (in MiB).",
       [](const Telemetry& t, const H&) { return as_int(t.fb_used_mib); }},
      {"DCGM_FI_DEV_FB_RESERVED", MetricType::kGauge, "Framebuffer memory reserved (in MiB).",
       [](const Telemetry& t, const H&) { return as_int(t.fb_reserved_mib); }},
      {"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", MetricType::kCounter,
       "Total number of NVLink bandwidth counters for all lanes.",
       [](const Telemetry&, const H& h) { return as_int(h.nvlink_bandwidth); }},
      {"DCGM_FI_DEV_VGPU_LICENSE_STATUS", MetricType::kGauge, "vGPU License status",
       [](const Telemetry&, const H&) -> std::optional<Value> { return std::nullopt; }},  // no NVML source here
      {"DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", MetricType::kCounter,
       "Number of remapped rows for uncorrectable errors",
       [](const Telemetry& t, const H&) { return as_int(t.remapped_rows_uncorrectable); }},
      {"DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", MetricType::kCounter, "Number of remapped rows for correctable errors",
       [](const Telemetry& t, const H&) { return as_int(t.remapped_rows_correctable); }},
      {"DCGM_FI_DEV_ROW_REMAP_FAILURE", MetricType::kGauge, "Whether remapping of rows has failed",
       [](const Telemetry& t, const H&) { return as_int(t.remap_failure); }},
      {"DCGM_FI_DRIVER_VERSION", MetricType::kLabel, "Driver Version",
       [](const Telemetry&, const H&) -> std::optional<Value> { return std::nullopt; }},
      {"DCGM_FI_PROF_GR_ENGINE_ACTIVE", MetricType::kGauge, "Ratio of time the graphics engine is active.",
       [](const Telemetry& t, const H&) { return as_real(t.gr_engine_active); }},
      {"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", MetricType::kGauge, "Ratio of cycles the tensor (HMMA) pipe is active.",
       [](const Telemetry& t, const H&) { return as_real(t.tensor_active); }},
      {"DCGM_FI_PROF_DRAM_ACTIVE", MetricType::kGauge,
       "Ratio of cycles the device memory interface is active sending or receiving data.",
       [](const Telemetry& t, const H&) { return as_real(t.dram_active); }},
      {"DCGM_FI_PROF_PCIE_TX_BYTES", MetricType::kGauge,
       "The rate of data transmitted over the PCIe bus - including both protocol headers and data payloads - in "
       "bytes per second.",
       [](const Telemetry& t, const H&) { return as_real(t.pcie_tx_bytes_per_s); }},
      {"DCGM_FI_PROF_PCIE_RX_BYTES", MetricType::kGauge,
       "The rate of data received over the PCIe bus - including both protocol headers and data payloads - in bytes "
       "per second.",
       [](const Telemetry& t, const H&) { return as_real(t.pcie_rx_bytes_per_s); }},
      // Beyond the defaults: available to counters files.
      {"DCGM_FI_DEV_POWER_MGMT_LIMIT", MetricType::kGauge, "Power management limit (in W).",
       [](const Telemetry& t, const H&) -> std::optional<Value> {
         if (!t.power_limit_mw) return std::nullopt;
         return Value::real(*t.power_limit_mw / 1000.0);
       }},
      {"DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", MetricType::kCounter, "Total number of single-bit volatile ECC errors.",
       [](const Telemetry& t, const H&) { return as_int(t.ecc_sbe_volatile); }},
      {"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", MetricType::kCounter, "Total number of double-bit volatile ECC errors.",
       [](const Telemetry& t, const H&) { return as_int(t.ecc_dbe_volatile); }},
      {"DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", MetricType::kCounter, "Total number of single-bit persistent ECC errors.",
       [](const Telemetry& t, const H&) { return as_int(t.ecc_sbe_aggregate); }},
      {"DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", MetricType::kCounter, "Total number of double-bit persistent ECC errors.",
       [](const Telemetry& t, const H&) { return as_int(t.ecc_dbe_aggregate); }},
      {"DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", MetricType::kGauge, "Throttling reasons bitmask.",
       [](const Telemetry& t, const H&) { return as_int(t.clock_event_reasons); }},
      // Profiling fields only DCGM provides (src/gpu/dcgm; docs/metrics.md, "Profiling fields").
      {"DCGM_FI_PROF_SM_ACTIVE", MetricType::kGauge, "Ratio of cycles at least one warp is assigned to an SM.",
       [](const Telemetry& t, const H&) { return dcgm_field(t, 1002); }},
      {"DCGM_FI_PROF_SM_OCCUPANCY", MetricType::kGauge, "Ratio of warps resident on an SM to its maximum.",
       [](const Telemetry& t, const H&) { return dcgm_field(t, 1003); }},
      {"DCGM_FI_PROF_PIPE_FP64_ACTIVE", MetricType::kGauge, "Ratio of cycles the FP64 pipe is active.",
       [](const Telemetry& t, const H&) { return dcgm_field(t, 1006); }},
      {"DCGM_FI_PROF_PIPE_FP32_ACTIVE", MetricType::kGauge, "Ratio of cycles the FP32 pipe is active.",
       [](const Telemetry& t, const H&) { return dcgm_field(t, 1007); }},
      {"DCGM_FI_PROF_PIPE_FP16_ACTIVE", MetricType::kGauge, "Ratio of cycles the FP16 pipe is active.",
       [](const Telemetry& t, const H&) { return dcgm_field(t, 1008); }},
      {"DCGM_FI_PROF_NVLINK_TX_BYTES", MetricType::kGauge, "NVLink transmit rate, headers and payload (in B/s).",
       [](const Telemetry& t, const H&) { return dcgm_field(t, 1011); }},
      {"DCGM_FI_PROF_NVLINK_RX_BYTES", MetricType::kGauge, "NVLink receive rate, headers and payload (in B/s).",
       [](const Telemetry& t, const H&) { return dcgm_field(t, 1012); }},
      {"DCGM_FI_DEV_CLOCKS_EVENT_REASONS", MetricType::kGauge, "Current clock event reasons (bitmask).",
       [](const Telemetry& t, const H&) { return as_int(t.clock_event_reasons); }},
  };
  return kFields;
}

const Field* find_field(const std::string& name) {
  for (const auto& f : fields()) {
    if (name == f.name) return &f;
  }
  return nullptr;
}

std::vector<Counter> default_counters() {
  std::vector<Counter> out;
  for (const char* name : kDefaultCounters) {
    const Field* f = find_field(name);
    out.push_back({f, f->type, f->help, f->name});
  }
  return out;
}

Result<CounterSet> parse_counters(const std::string& text, const std::string& source) {
  CounterSet set;
  std::istringstream in(text);
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto c1 = t.find(',');
    const auto c2 = c1 == std::string::npos ? std::string::npos : t.find(',', c1 + 1);
    if (c2 == std::string::npos) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: expected 'FIELD, type, help', got '{}'", source, number, t);
    }
    const std::string name = trim(t.substr(0, c1));
    const std::string type = trim(t.substr(c1 + 1, c2 - c1 - 1));
    const std::string help = trim(t.substr(c2 + 1));
    MetricType mt;
    if (type == "gauge") {
      mt = MetricType::kGauge;
    } else if (type == "counter") {
      mt = MetricType::kCounter;
    } else if (type == "label") {
      mt = MetricType::kLabel;
    } else {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {}: unknown type '{}' (gauge, counter or label)", source, number,
                  name, type);
    }
    if (name.starts_with("DCGM_EXP_")) {
      const auto* e = std::find_if(std::begin(kExporterNames), std::end(kExporterNames),
                                   [&](const ExporterName& x) { return name == x.name; });
      if (e == std::end(kExporterNames)) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: '{}' is not one of dcgm-exporter's fields ({})", source,
                    number, name,
                    "DCGM_EXP_XID_ERRORS_COUNT, DCGM_EXP_CLOCK_EVENTS_COUNT, DCGM_EXP_GPU_HEALTH_STATUS, "
                    "DCGM_EXP_P2P_STATUS");
      }
      if (e->missing != nullptr) {
        set.warnings.push_back(
            fmt::format("{}:{}: {} is not available: {}; skipped", source, number, name, e->missing));
        continue;
      }
      if (mt == MetricType::kLabel) {
        return fail(ErrorCode::kInvalidArgument, "{}:{}: {} is a counter, not a label", source, number, name);
      }
      if (std::any_of(set.counters.begin(), set.counters.end(), [&](const Counter& c) { return c.name == name; })) {
        set.warnings.push_back(fmt::format("{}:{}: {} is listed twice; the first line wins", source, number, name));
        continue;
      }
      set.counters.push_back({nullptr, mt, help, name, e->field});
      continue;
    }
    std::string field_name = name;
    const bool legacy = !name.starts_with("DCGM_FI_");
    if (legacy) {
      const char* f = legacy_field_name(name);
      if (f == nullptr) {
        return fail(ErrorCode::kInvalidArgument,
                    "{}:{}: '{}' is not a DCGM field name (DCGM_FI_*, DCGM_EXP_* or a dcgm-exporter 1.x name)", source,
                    number, name);
      }
      field_name = f;
    }
    const Field* f = find_field(field_name);
    if (f == nullptr) {
      set.warnings.push_back(
          legacy ? fmt::format("{}:{}: {} ({}) is not available from NVML; skipped", source, number, name, field_name)
                 : fmt::format("{}:{}: {} is not available from NVML; skipped", source, number, name));
      continue;
    }
    if ((mt == MetricType::kLabel) != (f->type == MetricType::kLabel)) {
      return fail(ErrorCode::kInvalidArgument, "{}:{}: {} is a {}, not a {}", source, number, name,
                  metric_type_name(f->type), type);
    }
    if (std::any_of(set.counters.begin(), set.counters.end(), [&](const Counter& c) { return c.name == name; })) {
      set.warnings.push_back(fmt::format("{}:{}: {} is listed twice; the first line wins", source, number, name));
      continue;
    }
    set.counters.push_back({f, mt, help, name, ExporterField::kNone});
  }
  return set;
}

}  // namespace kgpu::metrics
