#include "dra/claim_config.h"

#include <fmt/format.h>

#include "k8s/quantity.h"

namespace kgpu::dra {

namespace {

using nlohmann::json;

Result<void> only_keys(const json& obj, std::string_view path, std::initializer_list<std::string_view> keys) {
  for (const auto& [k, v] : obj.items()) {
    bool known = false;
    for (auto key : keys) known = known || k == key;
    if (!known) return fail(ErrorCode::kInvalidArgument, "{}.{}: unknown field", path, k);
  }
  return {};
}

// True when the config entry's requests list covers `request` ("req" covers "req/sub").
bool covers(const json& entry, std::string_view request) {
  const auto it = entry.find("requests");
  if (it == entry.end() || !it->is_array() || it->empty()) return true;
  for (const auto& r : *it) {
    if (!r.is_string()) continue;
    const std::string& name = r.get_ref<const std::string&>();
    if (name == request || (request.starts_with(name) && request.size() > name.size() && request[name.size()] == '/')) {
      return true;
    }
  }
  return false;
}

}  // namespace

Result<SharingSettings> parse_gpu_config(const json& p, DeviceType type) {
  if (!p.is_object()) return fail(ErrorCode::kInvalidArgument, "parameters: want an object");
  const std::string api = p.value("apiVersion", "");
  const std::string kind = p.value("kind", "");
  if (api != kConfigApiVersion) {
    return fail(ErrorCode::kInvalidArgument, "apiVersion: want {}, got '{}'", kConfigApiVersion, api);
  }
  const std::string want = type == DeviceType::kMig ? "MigDeviceConfig" : "GpuConfig";
  if (kind != "GpuConfig" && kind != "MigDeviceConfig") {
    return fail(ErrorCode::kInvalidArgument, "kind: want GpuConfig or MigDeviceConfig, got '{}'", kind);
  }
  if (kind != want) {
    return fail(ErrorCode::kInvalidArgument, "kind: {} does not apply to a {} device (want {})", kind,
                device_type_name(type), want);
  }
  if (auto ok = only_keys(p, "", {"apiVersion", "kind", "sharing", "metadata"}); !ok)
    return std::unexpected(ok.error());
  SharingSettings out;
  const auto sit = p.find("sharing");
  if (sit == p.end() || sit->is_null()) return out;
  const json& s = *sit;
  if (!s.is_object()) return fail(ErrorCode::kInvalidArgument, "sharing: want an object");
  if (auto ok = only_keys(s, "sharing", {"strategy", "timeSlicingConfig", "mpsConfig"}); !ok) {
    return std::unexpected(ok.error());
  }
  const std::string strategy = s.value("strategy", "");
  if (strategy == "TimeSlicing") {
    out.strategy = SharingStrategy::kTimeSlicing;
  } else if (strategy == "MPS") {
    out.strategy = SharingStrategy::kMps;
  } else {
    return fail(ErrorCode::kInvalidArgument, "sharing.strategy: want TimeSlicing or MPS, got '{}'", strategy);
  }
  if (out.strategy != SharingStrategy::kTimeSlicing && s.contains("timeSlicingConfig")) {
    return fail(ErrorCode::kInvalidArgument, "sharing.timeSlicingConfig: only with strategy TimeSlicing");
  }
  if (out.strategy != SharingStrategy::kMps && s.contains("mpsConfig")) {
    return fail(ErrorCode::kInvalidArgument, "sharing.mpsConfig: only with strategy MPS");
  }
  if (out.strategy == SharingStrategy::kTimeSlicing) {
    out.interval = "Default";
    if (const auto t = s.find("timeSlicingConfig"); t != s.end() && !t->is_null()) {
      if (!t->is_object()) return fail(ErrorCode::kInvalidArgument, "sharing.timeSlicingConfig: want an object");
      if (auto ok = only_keys(*t, "sharing.timeSlicingConfig", {"interval"}); !ok) return std::unexpected(ok.error());
      if (t->contains("interval")) {
        const json& i = (*t)["interval"];
        const std::string v = i.is_string() ? i.get<std::string>() : i.dump();
        if (v != "Default" && v != "Short" && v != "Medium" && v != "Long") {
          return fail(ErrorCode::kInvalidArgument,
                      "sharing.timeSlicingConfig.interval: want Default, Short, Medium or Long, got {}", v);
        }
        out.interval = v;
      }
    }
  }
  if (out.strategy == SharingStrategy::kMps) {
    if (const auto m = s.find("mpsConfig"); m != s.end() && !m->is_null()) {
      if (!m->is_object()) return fail(ErrorCode::kInvalidArgument, "sharing.mpsConfig: want an object");
      if (auto ok = only_keys(
              *m, "sharing.mpsConfig",
              {"defaultActiveThreadPercentage", "defaultPinnedDeviceMemoryLimit", "defaultPerDevicePinnedMemoryLimit"});
          !ok) {
        return std::unexpected(ok.error());
      }
      if (m->contains("defaultActiveThreadPercentage")) {
        const json& v = (*m)["defaultActiveThreadPercentage"];
        if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 100) {
          return fail(ErrorCode::kInvalidArgument,
                      "sharing.mpsConfig.defaultActiveThreadPercentage: want an integer 0..100, got {}", v.dump());
        }
        out.active_thread_percentage = static_cast<int>(v.get<int64_t>());
      }
      if (m->contains("defaultPinnedDeviceMemoryLimit")) {
        const json& v = (*m)["defaultPinnedDeviceMemoryLimit"];
        auto q = v.is_string()
                     ? k8s::Quantity::parse(v.get<std::string>())
                     : (v.is_number_integer() ? Result<k8s::Quantity>(k8s::Quantity::from_value(v.get<int64_t>()))
                                              : fail(ErrorCode::kInvalidArgument, "want a quantity"));
        if (!q) {
          return fail(ErrorCode::kInvalidArgument, "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: {}",
                      q.error().message);
        }
        if (q->is_negative() || q->is_zero()) {
          return fail(ErrorCode::kInvalidArgument,
                      "sharing.mpsConfig.defaultPinnedDeviceMemoryLimit: must be positive, got {}", v.dump());
        }
        out.pinned_memory_bytes = static_cast<uint64_t>(q->bytes());
      }
      if (m->contains("defaultPerDevicePinnedMemoryLimit")) {
        return fail(ErrorCode::kInvalidArgument,
                    "sharing.mpsConfig.defaultPerDevicePinnedMemoryLimit: not supported by this driver; use "
                    "defaultPinnedDeviceMemoryLimit");
      }
    }
  }
  return out;
}

Result<SharingSettings> settings_for(const json& claim, std::string_view driver, std::string_view request,
                                     DeviceType type) {
  const json* entries = nullptr;
  const json* alloc = nullptr;
  if (claim.contains("status") && claim["status"].contains("allocation")) alloc = &claim["status"]["allocation"];
  if (alloc != nullptr && alloc->contains("devices") && (*alloc)["devices"].contains("config") &&
      !(*alloc)["devices"]["config"].empty()) {
    entries = &(*alloc)["devices"]["config"];
  } else if (claim.contains("spec") && claim["spec"].contains("devices") &&
             claim["spec"]["devices"].contains("config")) {
    entries = &claim["spec"]["devices"]["config"];
  }
  if (entries == nullptr || !entries->is_array()) return SharingSettings{};
  // Rank: claim over class, specific over general; the last of the best rank wins.
  int best_rank = -1;
  SharingSettings best;
  for (size_t i = 0; i < entries->size(); ++i) {
    const json& e = (*entries)[i];
    if (!e.is_object() || !e.contains("opaque")) continue;
    const json& o = e["opaque"];
    if (!o.is_object() || o.value("driver", "") != driver) continue;
    if (!covers(e, request)) continue;
    auto s = parse_gpu_config(o.contains("parameters") ? o["parameters"] : json(), type);
    if (!s) return std::unexpected(s.error().wrap(fmt::format("config[{}] for driver {}", i, driver)));
    const bool from_class = e.value("source", "") == "FromClass";
    const bool specific = e.contains("requests") && e["requests"].is_array() && !e["requests"].empty();
    const int rank = (from_class ? 0 : 2) + (specific ? 1 : 0);
    if (rank >= best_rank) {
      best_rank = rank;
      best = *s;
    }
  }
  return best;
}

}  // namespace kgpu::dra
