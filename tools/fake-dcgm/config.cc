#include "config.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>

#include "common/yaml_guard.h"

namespace kgpu::fake_dcgm {

namespace {

struct Bad {
  std::string message;
};

[[noreturn]] void bad(const std::string& source, const YAML::Node& n, const std::string& field,
                      const std::string& why) {
  throw Bad{fmt::format("{}:{}: {}: {}", source, n.Mark().line + 1, field, why)};
}

void keys(const std::string& source, const YAML::Node& n, const std::string& path,
          const std::set<std::string>& allowed) {
  if (!n.IsMap()) bad(source, n, path, "expected a mapping");
  for (const auto& kv : n) {
    const auto k = kv.first.as<std::string>();
    if (!allowed.contains(k)) bad(source, kv.first, path.empty() ? k : path + "." + k, "unknown field");
  }
}

dcgm::Return status(const std::string& source, const YAML::Node& n, const std::string& path) {
  if (!n.IsScalar()) bad(source, n, path, "expected a DCGM status name");
  const auto r = dcgm::return_from_name(n.as<std::string>());
  if (!r || *r == dcgm::kOk) bad(source, n, path, fmt::format("'{}' is not a DCGM error status", n.as<std::string>()));
  return *r;
}

Answer answer(const std::string& source, const YAML::Node& n, const std::string& path) {
  Answer a;
  if (n.IsMap()) {
    keys(source, n, path, {"status"});
    if (!n["status"]) bad(source, n, path, "expected {status: <DCGM status>}");
    a.kind = Answer::kStatus;
    a.status = status(source, n["status"], path + ".status");
    return a;
  }
  if (!n.IsScalar()) bad(source, n, path, "expected a number, blank, notFound, notSupported or notPermissioned");
  const auto s = n.as<std::string>();
  if (s == "blank") {
    a.kind = Answer::kBlank;
  } else if (s == "notFound") {
    a.kind = Answer::kNotFound;
  } else if (s == "notSupported") {
    a.kind = Answer::kNotSupported;
  } else if (s == "notPermissioned") {
    a.kind = Answer::kNotPermissioned;
  } else {
    try {
      size_t used = 0;
      a.number = std::stod(s, &used);
      if (used != s.size() || !std::isfinite(a.number)) throw std::invalid_argument(s);
    } catch (const std::exception&) {
      bad(source, n, path, fmt::format("'{}' is not a number, blank, notFound, notSupported or notPermissioned", s));
    }
  }
  return a;
}

// NVML's GPU-instance ids run from 0 to 14.
constexpr unsigned kMaxGpuInstanceId = 14;

// The settings a GPU and a GPU instance share: profiling, frozen, status, fields.
void entity(const std::string& source, const YAML::Node& n, const std::string& path, EntitySettings& out) {
  if (n["profiling"]) out.profiling = n["profiling"].as<bool>();
  if (n["frozen"]) out.frozen = n["frozen"].as<bool>();
  if (n["status"]) out.status = status(source, n["status"], path + ".status");
  if (const auto fs = n["fields"]) {
    if (!fs.IsMap()) bad(source, fs, path + ".fields", "expected a mapping of DCGM_FI_PROF_* names");
    for (const auto& kv : fs) {
      const auto name = kv.first.as<std::string>();
      const unsigned short id = dcgm::profiling_field_id(name.c_str());
      if (id == 0) bad(source, kv.first, path + ".fields." + name, "not a DCGM profiling field (1001..1012)");
      out.answers[id] = answer(source, kv.second, path + ".fields." + name);
    }
  }
}

}  // namespace

Result<Settings> parse_settings(const std::string& text, const std::string& source) {
  YamlLimits limits;
  limits.max_bytes = kMaxSettingsBytes;
  limits.max_depth = 16;
  limits.max_nodes = 20000;
  if (auto ok = check_yaml(text, source, limits); !ok) return std::unexpected(ok.error());
  Settings s;
  try {
    const YAML::Node root = YAML::Load(text);
    if (!root || root.IsNull()) return s;
    keys(source, root, "", {"faults", "gpus"});
    if (const auto f = root["faults"]) {
      keys(source, f, "faults", {"init", "startEmbedded", "read", "hierarchy"});
      if (f["init"]) s.init_error = status(source, f["init"], "faults.init");
      if (f["startEmbedded"]) s.embedded_error = status(source, f["startEmbedded"], "faults.startEmbedded");
      if (f["read"]) s.read_error = status(source, f["read"], "faults.read");
      if (f["hierarchy"]) s.hierarchy_error = status(source, f["hierarchy"], "faults.hierarchy");
    }
    if (const auto gs = root["gpus"]) {
      if (!gs.IsSequence()) bad(source, gs, "gpus", "expected a list");
      for (size_t i = 0; i < gs.size(); ++i) {
        const auto& g = gs[i];
        const auto path = fmt::format("gpus[{}]", i);
        keys(source, g, path, {"index", "profiling", "frozen", "status", "fields", "instances"});
        if (!g["index"]) bad(source, g, path + ".index", "required");
        const auto index = g["index"].as<unsigned>();
        if (index >= dcgm::kMaxDevices) bad(source, g["index"], path + ".index", "must be below 32");
        auto& gpu = s.gpus[index];
        entity(source, g, path, gpu);
        if (const auto is = g["instances"]) {
          if (!is.IsSequence()) bad(source, is, path + ".instances", "expected a list");
          for (size_t k = 0; k < is.size(); ++k) {
            const auto& e = is[k];
            const auto ipath = fmt::format("{}.instances[{}]", path, k);
            keys(source, e, ipath, {"gpuInstanceId", "profiling", "frozen", "status", "fields"});
            if (!e["gpuInstanceId"]) bad(source, e, ipath + ".gpuInstanceId", "required");
            const auto gi = e["gpuInstanceId"].as<unsigned>();
            if (gi > kMaxGpuInstanceId) bad(source, e["gpuInstanceId"], ipath + ".gpuInstanceId", "must be at most 14");
            entity(source, e, ipath, gpu.instances[gi]);
          }
        }
      }
    }
  } catch (const Bad& b) {
    return fail(ErrorCode::kInvalidArgument, "{}", b.message);
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: {}", source, e.mark.line + 1, e.msg);
  }
  return s;
}

}  // namespace kgpu::fake_dcgm
