#include "sharing/config.h"

#include <yaml-cpp/yaml.h>

#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <set>
#include <sstream>

#include "common/files.h"
#include "common/yaml_guard.h"
#include "common/strings.h"

namespace kgpu::sharing {

const char* mig_strategy_name(MigStrategy s) {
  switch (s) {
    case MigStrategy::kNone: return "none";
    case MigStrategy::kSingle: return "single";
    case MigStrategy::kMixed: return "mixed";
  }
  return "none";
}

const char* list_strategy_name(ListStrategy s) {
  switch (s) {
    case ListStrategy::kEnvvar: return "envvar";
    case ListStrategy::kVolumeMounts: return "volume-mounts";
    case ListStrategy::kCdiAnnotations: return "cdi-annotations";
    case ListStrategy::kCdiCri: return "cdi-cri";
  }
  return "envvar";
}

const char* sharing_kind_name(SharingKind k) {
  switch (k) {
    case SharingKind::kNone: return "none";
    case SharingKind::kTimeSlicing: return "time-slicing";
    case SharingKind::kMps: return "mps";
  }
  return "none";
}

bool Config::has_list_strategy(ListStrategy s) const {
  return std::find(list_strategies.begin(), list_strategies.end(), s) != list_strategies.end();
}

Result<std::chrono::seconds> parse_duration(const std::string& text) {
  const std::string t = trim(text);
  if (t.empty()) return fail(ErrorCode::kInvalidArgument, "empty duration");
  double total_ms = 0;
  size_t i = 0;
  while (i < t.size()) {
    size_t j = i;
    while (j < t.size() && (std::isdigit(static_cast<unsigned char>(t[j])) || t[j] == '.')) ++j;
    if (j == i) return fail(ErrorCode::kInvalidArgument, "bad duration '{}': expected e.g. 60s, 1m30s, 1h", text);
    double n = 0;
    try {
      n = std::stod(t.substr(i, j - i));
    } catch (const std::exception&) {
      return fail(ErrorCode::kInvalidArgument, "bad duration '{}'", text);
    }
    size_t k = j;
    while (k < t.size() && std::isalpha(static_cast<unsigned char>(t[k]))) ++k;
    const std::string unit = t.substr(j, k - j);
    double scale = 0;
    if (unit == "h") scale = 3600e3;
    else if (unit == "m") scale = 60e3;
    else if (unit == "s") scale = 1e3;
    else if (unit == "ms") scale = 1;
    else if (unit.empty() && i == 0 && k == t.size()) scale = 1e3;  // a bare number: seconds
    else return fail(ErrorCode::kInvalidArgument, "bad duration '{}': unknown unit '{}' (h, m, s, ms)", text, unit);
    total_ms += n * scale;
    i = k;
  }
  return std::chrono::seconds(static_cast<long long>(total_ms / 1000));
}

namespace {

// Errors and warnings about one document, each prefixed with "<source>:<line>: <path>: ".
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  std::string where(const YAML::Node& n, const std::string& path) const {
    const auto m = n.Mark();
    if (m.line < 0) return fmt::format("{}: {}", source_, path);
    return fmt::format("{}:{}: {}", source_, m.line + 1, path);
  }
  int line(const YAML::Node& n) const { return n.Mark().line + 1; }

  template <typename... Args>
  std::unexpected<Error> error(const YAML::Node& n, const std::string& path, fmt::format_string<Args...> f,
                               Args&&... args) const {
    return std::unexpected(
        Error{ErrorCode::kInvalidArgument, where(n, path) + ": " + fmt::format(f, std::forward<Args>(args)...)});
  }

  // Warns about keys of `map` not in `known`.
  void check_keys(const YAML::Node& map, const std::string& path, std::initializer_list<const char*> known,
                  std::vector<std::string>& warnings) const {
    for (const auto& kv : map) {
      const auto key = kv.first.as<std::string>("");
      if (std::none_of(known.begin(), known.end(), [&](const char* k) { return key == k; })) {
        warnings.push_back(where(kv.first, path.empty() ? key : path + "." + key) + ": unknown field, ignored");
      }
    }
  }

  Result<std::string> scalar(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) return error(n, path, "expected a string");
    return n.Scalar();
  }

  Result<bool> boolean(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) return error(n, path, "expected true or false");
    bool b = false;
    if (!YAML::convert<bool>::decode(n, b)) return error(n, path, "expected true or false, got '{}'", n.Scalar());
    return b;
  }

  Result<int> integer(const YAML::Node& n, const std::string& path) const {
    if (!n.IsScalar()) return error(n, path, "expected a whole number");
    try {
      size_t used = 0;
      const long long v = std::stoll(n.Scalar(), &used);
      if (used != n.Scalar().size() || v < INT32_MIN || v > INT32_MAX) throw std::invalid_argument("range");
      return static_cast<int>(v);
    } catch (const std::exception&) {
      return error(n, path, "expected a whole number, got '{}'", n.Scalar());
    }
  }

 private:
  std::string source_;
};

Result<MigStrategy> mig_strategy_from(const std::string& s) {
  if (s == "none") return MigStrategy::kNone;
  if (s == "single") return MigStrategy::kSingle;
  if (s == "mixed") return MigStrategy::kMixed;
  return fail(ErrorCode::kInvalidArgument, "unknown MIG strategy '{}' (none, single, mixed)", s);
}

Result<ListStrategy> list_strategy_from(const std::string& s) {
  for (auto v : {ListStrategy::kEnvvar, ListStrategy::kVolumeMounts, ListStrategy::kCdiAnnotations,
                 ListStrategy::kCdiCri}) {
    if (s == list_strategy_name(v)) return v;
  }
  return fail(ErrorCode::kInvalidArgument,
              "unknown device list strategy '{}' (envvar, volume-mounts, cdi-annotations, cdi-cri)", s);
}

Result<IdStrategy> id_strategy_from(const std::string& s) {
  if (s == "uuid") return IdStrategy::kUuid;
  if (s == "index") return IdStrategy::kIndex;
  return fail(ErrorCode::kInvalidArgument, "unknown device ID strategy '{}' (uuid, index)", s);
}

Result<SharedPolicy> shared_policy_from(const std::string& s) {
  if (s == "distributed") return SharedPolicy::kDistributed;
  if (s == "packed") return SharedPolicy::kPacked;
  return fail(ErrorCode::kInvalidArgument, "unknown shared devices allocation policy '{}' (distributed, packed)", s);
}

Result<bool> bool_from(const std::string& s) {
  std::string l = s;
  std::transform(l.begin(), l.end(), l.begin(), [](unsigned char c) { return std::tolower(c); });
  if (l == "true" || l == "1" || l == "yes") return true;
  if (l == "false" || l == "0" || l == "no" || l.empty()) return false;
  return fail(ErrorCode::kInvalidArgument, "expected true or false, got '{}'", s);
}

// "0", "0,1", "[0]", "" (none): IMEX channel IDs as the file, a flag or IMEX_CHANNEL_IDS give them.
Result<std::vector<int>> imex_channel_ids_from(const std::string& text) {
  std::vector<int> out;
  std::string t = text;
  if (t.starts_with('[') && t.ends_with(']')) t = t.substr(1, t.size() - 2);
  std::istringstream in(t);
  std::string item;
  while (std::getline(in, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (item.empty()) continue;
    long long v = -1;
    const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (ec != std::errc() || end != item.data() + item.size() || v < 0 || v > kMaxImexChannel) {
      return fail(ErrorCode::kInvalidArgument, "'{}' is not an IMEX channel ID (0..{})", item, kMaxImexChannel);
    }
    if (out.size() >= kMaxListEntries) return fail(ErrorCode::kInvalidArgument, "more than {} IMEX channel IDs", kMaxListEntries);
    out.push_back(static_cast<int>(v));
  }
  return out;
}

// Parses a comma-separated list (flags/env) of device list strategies.
Result<std::vector<ListStrategy>> list_strategies_from(const std::string& s) {
  std::vector<ListStrategy> out;
  std::stringstream in(s);
  std::string item;
  while (std::getline(in, item, ',')) {
    auto v = list_strategy_from(trim(item));
    if (!v) return std::unexpected(v.error());
    if (std::find(out.begin(), out.end(), *v) == out.end()) out.push_back(*v);
  }
  if (out.empty()) return fail(ErrorCode::kInvalidArgument, "empty device list strategy");
  return out;
}

}  // namespace

// NVIDIA's rule: a bare name gets the nvidia.com/ prefix; the name part is a DNS-1123 label-like
// string ([a-z0-9] at both ends, [-a-z0-9.] inside) of at most 63 characters.
Result<std::string> resource_name(const std::string& raw) {
  std::string name = trim(raw);
  if (name.find('/') == std::string::npos) name = "nvidia.com/" + name;
  const auto slash = name.find('/');
  const std::string domain = name.substr(0, slash), part = name.substr(slash + 1);
  auto valid_part = [](const std::string& x) {
    if (x.empty() || x.size() > 63) return false;
    auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (!alnum(x.front()) || !alnum(x.back())) return false;
    return std::all_of(x.begin(), x.end(), [&](char c) { return alnum(c) || c == '-' || c == '.'; });
  };
  if (domain != "nvidia.com" || !valid_part(part)) {
    return fail(ErrorCode::kInvalidArgument,
                "'{}' is not a valid resource name (nvidia.com/<name>: lower-case letters, digits, '-' and '.', at "
                "most 63 characters, e.g. nvidia.com/gpu, nvidia.com/mig-1g.10gb)",
                raw);
  }
  return name;
}

namespace {

Result<DeviceSelector> parse_selector(const Reader& r, const YAML::Node& n, const std::string& path) {
  DeviceSelector sel;
  if (n.IsScalar()) {
    if (n.Scalar() == "all") return sel;
    auto c = r.integer(n, path);
    if (!c) return r.error(n, path, "expected 'all', a count or a list of GPU indices, MIG devices (0:1) or UUIDs");
    if (*c < 1) return r.error(n, path, "device count must be at least 1, got {}", *c);
    sel.all = false;
    sel.count = *c;
    return sel;
  }
  if (!n.IsSequence() || n.size() == 0) {
    return r.error(n, path, "expected 'all', a count or a non-empty list of GPU indices, MIG devices or UUIDs");
  }
  if (n.size() > kMaxListEntries) return r.error(n, path, "{} entries, at most {}", n.size(), kMaxListEntries);
  sel.all = false;
  std::set<std::string> seen;
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", path, i);
    auto s = r.scalar(n[i], p);
    if (!s) return std::unexpected(s.error());
    const std::string id = trim(*s);
    const bool index = !id.empty() && std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(c); });
    const auto colon = id.find(':');
    const bool mig = colon != std::string::npos && colon > 0 && colon + 1 < id.size() &&
                     std::all_of(id.begin(), id.end(), [](char c) { return std::isdigit(c) || c == ':'; }) &&
                     id.find(':', colon + 1) == std::string::npos;
    const bool uuid = id.starts_with("GPU-") || id.starts_with("MIG-");
    if (!index && !mig && !uuid) {
      return r.error(n[i], p, "'{}' is not a GPU index, a MIG device (<gpu>:<slot>) or a GPU-/MIG- UUID", id);
    }
    if (!seen.insert(id).second) return r.error(n[i], p, "device '{}' listed twice", id);
    sel.ids.push_back(id);
  }
  return sel;
}

Result<Sharing> parse_sharing(const Reader& r, const YAML::Node& n, const std::string& path, SharingKind kind,
                              std::vector<std::string>& warnings) {
  Sharing s;
  s.kind = kind;
  if (!n.IsMap()) return r.error(n, path, "expected a mapping (renameByDefault, failRequestsGreaterThanOne, resources)");
  r.check_keys(n, path, {"renameByDefault", "failRequestsGreaterThanOne", "resources"}, warnings);
  if (auto v = n["renameByDefault"]) {
    auto b = r.boolean(v, path + ".renameByDefault");
    if (!b) return std::unexpected(b.error());
    s.rename_by_default = *b;
  }
  if (auto v = n["failRequestsGreaterThanOne"]) {
    auto b = r.boolean(v, path + ".failRequestsGreaterThanOne");
    if (!b) return std::unexpected(b.error());
    s.fail_requests_greater_than_one = *b;
  }
  const auto res = n["resources"];
  if (!res || res.IsNull()) return r.error(n, path + ".resources", "at least one resource is required");
  if (!res.IsSequence()) return r.error(res, path + ".resources", "expected a list");
  if (res.size() > kMaxSharedResources) {
    return r.error(res, path + ".resources", "{} entries, at most {}", res.size(), kMaxSharedResources);
  }
  for (size_t i = 0; i < res.size(); ++i) {
    const auto e = res[i];
    const std::string p = fmt::format("{}.resources[{}]", path, i);
    if (!e.IsMap()) return r.error(e, p, "expected a mapping (name, replicas, rename, devices)");
    r.check_keys(e, p, {"name", "rename", "devices", "replicas"}, warnings);
    ReplicatedResource rr;
    rr.line = r.line(e);
    if (!e["name"]) return r.error(e, p + ".name", "required (e.g. nvidia.com/gpu)");
    auto name = r.scalar(e["name"], p + ".name");
    if (!name) return std::unexpected(name.error());
    auto normalized = resource_name(*name);
    if (!normalized) return r.error(e["name"], p + ".name", "{}", normalized.error().message);
    rr.name = *normalized;
    if (!e["replicas"]) return r.error(e, p + ".replicas", "required (at least 2)");
    auto reps = r.integer(e["replicas"], p + ".replicas");
    if (!reps) return std::unexpected(reps.error());
    if (*reps < 2) return r.error(e["replicas"], p + ".replicas", "must be at least 2, got {}", *reps);
    const long long most = kind == SharingKind::kMps ? kMaxMpsReplicas : kMaxReplicas;
    if (*reps > most) {
      return r.error(e["replicas"], p + ".replicas", "at most {}{}, got {}", most,
                     kind == SharingKind::kMps ? " with MPS (each replica gets 100/replicas % of the SMs)" : "", *reps);
    }
    rr.replicas = *reps;
    if (auto v = e["rename"]) {
      auto s2 = r.scalar(v, p + ".rename");
      if (!s2) return std::unexpected(s2.error());
      if (!s2->empty()) {
        auto renamed = resource_name(*s2);
        if (!renamed) return r.error(v, p + ".rename", "{}", renamed.error().message);
        rr.rename = *renamed;
      }
    }
    if (auto v = e["devices"]) {
      auto sel = parse_selector(r, v, p + ".devices");
      if (!sel) return std::unexpected(sel.error());
      rr.devices = *sel;
    }
    s.resources.push_back(std::move(rr));
  }
  if (s.resources.empty()) return r.error(res, path + ".resources", "at least one resource is required");
  return s;
}

Result<std::vector<NamedResource>> parse_named(const Reader& r, const YAML::Node& n, const std::string& path,
                                               std::vector<std::string>& warnings) {
  std::vector<NamedResource> out;
  if (!n.IsSequence()) return r.error(n, path, "expected a list of {{pattern, name}}");
  if (n.size() > kMaxListEntries) return r.error(n, path, "{} entries, at most {}", n.size(), kMaxListEntries);
  for (size_t i = 0; i < n.size(); ++i) {
    const std::string p = fmt::format("{}[{}]", path, i);
    if (!n[i].IsMap()) return r.error(n[i], p, "expected a mapping with pattern and name");
    r.check_keys(n[i], p, {"pattern", "name"}, warnings);
    NamedResource nr;
    for (auto [key, field] : {std::pair{"pattern", &nr.pattern}, std::pair{"name", &nr.name}}) {
      if (!n[i][key]) return r.error(n[i], p + "." + key, "required");
      auto s = r.scalar(n[i][key], p + "." + key);
      if (!s) return std::unexpected(s.error());
      *field = *s;
    }
    if (nr.name.starts_with("nvidia.com/")) nr.name = nr.name.substr(11);
    if (nr.name.empty() || nr.name.find('/') != std::string::npos) {
      return r.error(n[i]["name"], p + ".name", "'{}' is not a resource name (e.g. gpu, a100)", nr.name);
    }
    out.push_back(std::move(nr));
  }
  return out;
}

// Setters from a flag/file string to a config field, shared by the file and the overrides.
auto assign(std::string& field) {
  return [&field](const std::string& v) -> Result<void> {
    field = v;
    return {};
  };
}

template <typename T, typename Parse>
auto parsed(T& field, Parse parse) {
  return [&field, parse](const std::string& v) -> Result<void> {
    auto x = parse(v);
    if (!x) return std::unexpected(x.error());
    field = *x;
    return {};
  };
}

Result<void> parse_flags(const Reader& r, const YAML::Node& flags, Config& c) {
  if (!flags.IsMap()) return r.error(flags, "flags", "expected a mapping");
  r.check_keys(flags, "flags",
               {"migStrategy", "failOnInitError", "nvidiaDriverRoot", "nvidiaDevRoot", "mpsRoot", "gdsEnabled",
                "mofedEnabled", "gdrcopyEnabled", "useNodeFeatureAPI", "deviceDiscoveryStrategy", "plugin", "gfd"},
               c.warnings);
  // String-valued flags go through the same parsers as the command line and environment.
  auto str = [&](const YAML::Node& n, const std::string& path, auto apply) -> Result<void> {
    if (!n || n.IsNull()) return {};
    auto s = r.scalar(n, path);
    if (!s) return std::unexpected(s.error());
    auto ok = apply(*s);
    if (!ok) return std::unexpected(Error{ErrorCode::kInvalidArgument, r.where(n, path) + ": " + ok.error().message});
    return {};
  };
  std::vector<Result<void>> results;
  results.push_back(str(flags["migStrategy"], "flags.migStrategy", parsed(c.mig_strategy, mig_strategy_from)));
  results.push_back(str(flags["failOnInitError"], "flags.failOnInitError", parsed(c.fail_on_init_error, bool_from)));
  results.push_back(str(flags["nvidiaDriverRoot"], "flags.nvidiaDriverRoot", assign(c.nvidia_driver_root)));
  results.push_back(str(flags["nvidiaDevRoot"], "flags.nvidiaDevRoot", assign(c.nvidia_dev_root)));
  results.push_back(str(flags["mpsRoot"], "flags.mpsRoot", assign(c.mps_root)));
  results.push_back(str(flags["gdsEnabled"], "flags.gdsEnabled", parsed(c.gds_enabled, bool_from)));
  results.push_back(str(flags["mofedEnabled"], "flags.mofedEnabled", parsed(c.mofed_enabled, bool_from)));
  results.push_back(str(flags["gdrcopyEnabled"], "flags.gdrcopyEnabled", parsed(c.gdrcopy_enabled, bool_from)));
  if (const auto plugin = flags["plugin"]; plugin && !plugin.IsNull()) {
    if (!plugin.IsMap()) return r.error(plugin, "flags.plugin", "expected a mapping");
    r.check_keys(plugin, "flags.plugin",
                 {"passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix",
                  "nvidiaCTKPath", "containerDriverRoot", "sharedDevicesAllocationPolicy"},
                 c.warnings);
    results.push_back(
        str(plugin["passDeviceSpecs"], "flags.plugin.passDeviceSpecs", parsed(c.pass_device_specs, bool_from)));
    if (const auto dls = plugin["deviceListStrategy"]; dls && dls.IsSequence()) {
      c.list_strategies.clear();
      for (size_t i = 0; i < dls.size(); ++i) {
        const std::string p = fmt::format("flags.plugin.deviceListStrategy[{}]", i);
        results.push_back(str(dls[i], p, [&](const std::string& v) -> Result<void> {
          auto s = list_strategy_from(v);
          if (!s) return std::unexpected(s.error());
          if (!c.has_list_strategy(*s)) c.list_strategies.push_back(*s);
          return {};
        }));
      }
      if (dls.size() == 0) return r.error(dls, "flags.plugin.deviceListStrategy", "empty list");
    } else {
      results.push_back(str(dls, "flags.plugin.deviceListStrategy", parsed(c.list_strategies, list_strategies_from)));
    }
    results.push_back(
        str(plugin["deviceIDStrategy"], "flags.plugin.deviceIDStrategy", parsed(c.id_strategy, id_strategy_from)));
    results.push_back(
        str(plugin["cdiAnnotationPrefix"], "flags.plugin.cdiAnnotationPrefix", assign(c.cdi_annotation_prefix)));
    results.push_back(
        str(plugin["containerDriverRoot"], "flags.plugin.containerDriverRoot", assign(c.container_driver_root)));
    results.push_back(str(plugin["sharedDevicesAllocationPolicy"], "flags.plugin.sharedDevicesAllocationPolicy",
                          parsed(c.shared_policy, shared_policy_from)));
  }
  if (const auto gfd = flags["gfd"]; gfd && !gfd.IsNull()) {
    if (!gfd.IsMap()) return r.error(gfd, "flags.gfd", "expected a mapping");
    r.check_keys(gfd, "flags.gfd",
                 {"oneshot", "noTimestamp", "sleepInterval", "outputFile", "machineTypeFile", "labelsDirectory"},
                 c.warnings);
    results.push_back(str(gfd["oneshot"], "flags.gfd.oneshot", parsed(c.gfd_oneshot, bool_from)));
    results.push_back(str(gfd["noTimestamp"], "flags.gfd.noTimestamp", parsed(c.gfd_no_timestamp, bool_from)));
    results.push_back(
        str(gfd["sleepInterval"], "flags.gfd.sleepInterval", parsed(c.gfd_sleep_interval, parse_duration)));
    results.push_back(str(gfd["outputFile"], "flags.gfd.outputFile", assign(c.gfd_output_file)));
    results.push_back(str(gfd["machineTypeFile"], "flags.gfd.machineTypeFile", assign(c.gfd_machine_type_file)));
  }
  for (auto& res : results) {
    if (!res) return res;
  }
  return {};
}

}  // namespace

Result<Config> parse_config(const std::string& text, const std::string& source) {
  Config c;
  c.source = source;
  const Reader r(source);
  if (auto ok = check_yaml(text, source, {kMaxConfigBytes, kMaxConfigNodes, kMaxConfigDepth}); !ok) {
    return std::unexpected(ok.error());
  }
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    return fail(ErrorCode::kInvalidArgument, "{}:{}: not valid YAML: {}", source, e.mark.line + 1, e.msg);
  }
  if (!root || root.IsNull()) return c;
  if (!root.IsMap()) return r.error(root, "(document)", "expected a mapping with version, flags, resources, sharing");
  r.check_keys(root, "", {"version", "flags", "resources", "sharing", "imex"}, c.warnings);
  if (auto v = root["version"]) {
    auto s = r.scalar(v, "version");
    if (!s) return std::unexpected(s.error());
    if (!s->empty() && *s != "v1") return r.error(v, "version", "unsupported version '{}' (only v1)", *s);
  }
  if (auto flags = root["flags"]; flags && !flags.IsNull()) {
    if (auto ok = parse_flags(r, flags, c); !ok) return std::unexpected(ok.error());
  }
  if (auto imex = root["imex"]; imex && !imex.IsNull()) {
    if (!imex.IsMap()) return r.error(imex, "imex", "expected a mapping with channelIDs and required");
    r.check_keys(imex, "imex", {"channelIDs", "required"}, c.warnings);
    if (auto ids = imex["channelIDs"]; ids && !ids.IsNull()) {
      if (!ids.IsSequence()) return r.error(ids, "imex.channelIDs", "expected a list of channel IDs ([] or [0])");
      if (ids.size() > kMaxListEntries) {
        return r.error(ids, "imex.channelIDs", "{} entries; at most {}", ids.size(), kMaxListEntries);
      }
      for (size_t i = 0; i < ids.size(); ++i) {
        const std::string p = fmt::format("imex.channelIDs[{}]", i);
        auto s = r.scalar(ids[i], p);
        if (!s) return std::unexpected(s.error());
        auto v = imex_channel_ids_from(*s);
        if (!v || v->size() != 1) return r.error(ids[i], p, "'{}' is not a channel ID (0..{})", *s, kMaxImexChannel);
        c.imex_channel_ids.push_back(v->front());
      }
    }
    if (auto req = imex["required"]; req && !req.IsNull()) {
      auto s = r.scalar(req, "imex.required");
      if (!s) return std::unexpected(s.error());
      auto b = bool_from(*s);
      if (!b) return r.error(req, "imex.required", "{}", b.error().message);
      c.imex_required = *b;
    }
  }
  if (auto res = root["resources"]; res && !res.IsNull()) {
    if (!res.IsMap()) return r.error(res, "resources", "expected a mapping with gpus and/or mig");
    r.check_keys(res, "resources", {"gpus", "mig"}, c.warnings);
    for (const char* key : {"gpus", "mig"}) {
      if (auto list = res[key]; list && !list.IsNull()) {
        auto named = parse_named(r, list, std::string("resources.") + key, c.warnings);
        if (!named) return std::unexpected(named.error());
      }
    }
    // As NVIDIA's plugin: validated, then ignored, so a copied config never renames resources.
    c.warnings.push_back(r.where(res, "resources") +
                         ": customizing resource names is not supported (as in NVIDIA's plugin); ignored");
  }
  if (auto sh = root["sharing"]; sh && !sh.IsNull()) {
    if (!sh.IsMap()) return r.error(sh, "sharing", "expected a mapping with timeSlicing or mps");
    r.check_keys(sh, "sharing", {"timeSlicing", "mps"}, c.warnings);
    const auto ts = sh["timeSlicing"];
    const auto mps = sh["mps"];
    const bool has_ts = ts && !ts.IsNull() && !(ts.IsMap() && ts.size() == 0);
    const bool has_mps = mps && !mps.IsNull() && !(mps.IsMap() && mps.size() == 0);
    if (has_ts && has_mps) {
      return r.error(mps, "sharing", "timeSlicing and mps cannot be combined: configure one of them");
    }
    if (has_ts) {
      auto s = parse_sharing(r, ts, "sharing.timeSlicing", SharingKind::kTimeSlicing, c.warnings);
      if (!s) return std::unexpected(s.error());
      c.sharing = std::move(*s);
    } else if (has_mps) {
      auto s = parse_sharing(r, mps, "sharing.mps", SharingKind::kMps, c.warnings);
      if (!s) return std::unexpected(s.error());
      c.sharing = std::move(*s);
    }
  }
  if (c.warnings.size() > kMaxWarnings) {
    const size_t more = c.warnings.size() - kMaxWarnings;
    c.warnings.resize(kMaxWarnings);
    c.warnings.push_back(fmt::format("{}: {} more warnings like these, not listed", source, more));
  }
  return c;
}

Result<void> finalize(Config& c, const Overrides& o) {
  auto apply = [](const std::optional<std::string>& value, const char* flag, auto setter) -> Result<void> {
    if (!value) return {};
    auto ok = setter(*value);
    if (!ok) return std::unexpected(ok.error().wrap(flag));
    return {};
  };
  const Result<void> results[] = {
      apply(o.mig_strategy, "--mig-strategy", parsed(c.mig_strategy, mig_strategy_from)),
      apply(o.fail_on_init_error, "--fail-on-init-error", parsed(c.fail_on_init_error, bool_from)),
      apply(o.nvidia_driver_root, "--nvidia-driver-root", assign(c.nvidia_driver_root)),
      apply(o.nvidia_dev_root, "--dev-root", assign(c.nvidia_dev_root)),
      apply(o.mps_root, "--mps-root", assign(c.mps_root)),
      apply(o.pass_device_specs, "--pass-device-specs", parsed(c.pass_device_specs, bool_from)),
      apply(o.device_list_strategy, "--device-list-strategy", parsed(c.list_strategies, list_strategies_from)),
      apply(o.device_id_strategy, "--device-id-strategy", parsed(c.id_strategy, id_strategy_from)),
      apply(o.cdi_annotation_prefix, "--cdi-annotation-prefix", assign(c.cdi_annotation_prefix)),
      apply(o.container_driver_root, "--container-driver-root", assign(c.container_driver_root)),
      apply(o.shared_devices_allocation_policy, "--shared-devices-allocation-policy",
            parsed(c.shared_policy, shared_policy_from)),
      apply(o.gfd_oneshot, "--oneshot", parsed(c.gfd_oneshot, bool_from)),
      apply(o.gfd_no_timestamp, "--no-timestamp", parsed(c.gfd_no_timestamp, bool_from)),
      apply(o.gfd_sleep_interval, "--sleep-interval", parsed(c.gfd_sleep_interval, parse_duration)),
      apply(o.gfd_output_file, "--output-file", assign(c.gfd_output_file)),
      apply(o.gfd_machine_type_file, "--machine-type-file", assign(c.gfd_machine_type_file)),
      apply(o.gds_enabled, "--gds-enabled", parsed(c.gds_enabled, bool_from)),
      apply(o.mofed_enabled, "--mofed-enabled", parsed(c.mofed_enabled, bool_from)),
      apply(o.gdrcopy_enabled, "--gdrcopy-enabled", parsed(c.gdrcopy_enabled, bool_from)),
      apply(o.imex_channel_ids, "--imex-channel-ids", parsed(c.imex_channel_ids, imex_channel_ids_from)),
      apply(o.imex_required, "--imex-required", parsed(c.imex_required, bool_from)),
  };
  for (const auto& res : results) {
    if (!res) return res;
  }

  // Cross-field rules (NVIDIA's, plus what our extensions need).
  auto at = [&](const ReplicatedResource& rr) { return fmt::format("{}:{}", c.source, rr.line); };
  if (c.sharing.kind == SharingKind::kMps) {
    if (c.mig_strategy == MigStrategy::kMixed) {
      return fail(ErrorCode::kInvalidArgument, "{}: sharing.mps cannot be used with migStrategy mixed", c.source);
    }
    c.sharing.fail_requests_greater_than_one = true;  // NVIDIA forces this for MPS
    for (const auto& rr : c.sharing.resources) {
      if (rr.name != "nvidia.com/gpu") {
        return fail(ErrorCode::kInvalidArgument, "{}: sharing.mps: resource '{}': MPS shares whole GPUs only "
                    "(nvidia.com/gpu); it cannot be used with MIG devices", at(rr), rr.name);
      }
    }
  }
  for (const auto& rr : c.sharing.resources) {
    if (rr.rename == rr.name) {
      return fail(ErrorCode::kInvalidArgument, "{}: resource '{}': rename must differ from the name", at(rr), rr.name);
    }
  }
  // NVIDIA's rule: only the default channel can be selected this way.
  if (!(c.imex_channel_ids.empty() || (c.imex_channel_ids.size() == 1 && c.imex_channel_ids[0] == 0))) {
    return fail(ErrorCode::kInvalidArgument, "{}: imex.channelIDs must be [] or [0]; found [{}]", c.source,
                fmt::join(c.imex_channel_ids, ","));
  }
  if (c.gfd_sleep_interval.count() < 1) {
    return fail(ErrorCode::kInvalidArgument, "{}: flags.gfd.sleepInterval must be at least 1s", c.source);
  }
  if (!c.cdi_annotation_prefix.ends_with('/')) {
    return fail(ErrorCode::kInvalidArgument, "{}: cdiAnnotationPrefix '{}' must end with '/'", c.source,
                c.cdi_annotation_prefix);
  }
  return {};
}

Result<Config> load_config(const std::string& path, const Overrides& overrides) {
  Config c;
  c.source = "defaults";
  if (!path.empty()) {
    const auto text = read_file_limited(path, kMaxConfigBytes);
    if (!text) return std::unexpected(text.error().wrap("config file"));
    auto parsed = parse_config(*text, path);
    if (!parsed) return parsed;
    c = std::move(*parsed);
  }
  if (auto ok = finalize(c, overrides); !ok) return std::unexpected(ok.error());
  return c;
}

}  // namespace kgpu::sharing
