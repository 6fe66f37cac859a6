// dcgm-exporter compatible counters: the field table and the counters CSV file (`-f`).
//
// Every DCGM field kgpu can fill is declared once in a table (name, default type and HELP, how
// to read it from a telemetry sample). A counters file selects and orders the metrics with
// dcgm-exporter's format: `FIELD, type, help` per line, `#` comments, fields trimmed. A line names
// a DCGM field (`DCGM_FI_*`), one of dcgm-exporter's own fields (`DCGM_EXP_*`, counted by the
// exporter over a window), or a legacy lower-case name of dcgm-exporter 1.x
// (`dcgm_gpu_temp`, from its 1.x-compatibility-metrics.csv), which is served under that name.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "gpu/types.h"

namespace kgpu::metrics {

enum class MetricType { kGauge, kCounter, kLabel };
const char* metric_type_name(MetricType t);

// A sample value: integers print as %d, doubles as %f (dcgm-exporter's formats).
struct Value {
  bool is_double = false;
  long long i = 0;
  double d = 0;
  static Value integer(long long v) { return {false, v, 0}; }
  static Value real(double v) { return {true, 0, v}; }
};
std::string format_value(const Value& v);

// Per-device state the sampler keeps between samples (rates, last XID).
struct DeviceHistory {
  std::optional<uint64_t> last_xid;
  std::optional<long long> nvlink_bandwidth;  // DCGM's NVLINK_BANDWIDTH_TOTAL, from two samples
};

struct Field {
  const char* name;  // DCGM_FI_...
  MetricType type;
  const char* help;  // dcgm-exporter's default-counters.csv text
  // Reads the value; nullopt = not provided by this GPU (the series is omitted).
  std::function<std::optional<Value>(const gpu::Telemetry&, const DeviceHistory&)> read;
};

// Every field kgpu supports, in dcgm-exporter's default-counters.csv order.
const std::vector<Field>& fields();
const Field* find_field(const std::string& name);

// dcgm-exporter's own fields, computed from a DCGM field's samples within a window.
enum class ExporterField {
  kNone,
  kXidErrorsCount,    // DCGM_EXP_XID_ERRORS_COUNT: XID events per code within the window
  kClockEventsCount,  // DCGM_EXP_CLOCK_EVENTS_COUNT: samples with each clock event reason active
};

struct Counter {
  const Field* field;  // null for an exporter field
  MetricType type;
  std::string help;
  std::string name;  // the metric's name: the field's, or the legacy 1.x name as the file wrote it
  ExporterField exporter = ExporterField::kNone;
};

// The DCGM field a dcgm-exporter 1.x name stands for ("dcgm_gpu_temp" -> "DCGM_FI_DEV_GPU_TEMP"),
// or nullptr when `name` is not one of them.
const char* legacy_field_name(std::string_view name);

// The 26 default counters (dcgm-exporter's default-counters.csv).
std::vector<Counter> default_counters();

struct CounterSet {
  std::vector<Counter> counters;
  // Fields the file names that kgpu has no NVML source for ("file:line: DCGM_FI_PROF_SM_ACTIVE
  // is not available from NVML; skipped"), so a dcgm-exporter file works unchanged. A legacy name
  // says which field it stands for.
  std::vector<std::string> warnings;
};

// Parses a counters file. Malformed lines (missing columns, an unknown type, a name that is not
// a DCGM field, an unknown DCGM_EXP_ or legacy name) are errors naming `source:line`.
Result<CounterSet> parse_counters(const std::string& text, const std::string& source);

}  // namespace kgpu::metrics
