#include "gpu/mig_config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>

#include "common/files.h"
#include "common/yaml_load.h"

namespace kgpu::gpu::mig {

namespace {

constexpr YamlLimits kLimits{1 << 20, 200'000, 16};
constexpr size_t kMaxConfigs = 1024;
constexpr size_t kMaxEntries = 64;
constexpr unsigned kMaxCount = kComputeSlices;
constexpr unsigned kMaxIndex = 1024;

using Reader = YamlReader;

Result<uint32_t> parse_pci_id(const Reader& r, const YAML::Node& n, const std::string& field) {
  if (!n.IsScalar()) return r.bad(n, field, "expected a PCI id such as 0x233010DE");
  const std::string s = n.Scalar();
  if (s.size() != 10 || (s.rfind("0x", 0) != 0 && s.rfind("0X", 0) != 0) ||
      s.find_first_not_of("0123456789abcdefABCDEF", 2) != std::string::npos) {
    return r.bad(n, field, "'{}' is not a PCI id such as 0x233010DE (device 0x2330, vendor 0x10DE)", s);
  }
  return static_cast<uint32_t>(std::stoul(s.substr(2), nullptr, 16));
}

Result<ConfigEntry> parse_entry(const Reader& r, const YAML::Node& e, const std::string& field) {
  if (!e.IsMap()) return r.bad(e, field, "expected a mapping with devices, mig-enabled and mig-devices");
  ConfigEntry out;
  out.line = e.Mark().line + 1;
  for (const auto& kv : e) {
    const auto k = kv.first.Scalar();
    if (k != "devices" && k != "mig-enabled" && k != "mig-devices" && k != "device-filter") {
      return r.bad(kv.first, field, "unknown field '{}' (devices, mig-enabled, mig-devices, device-filter)", k);
    }
  }
  const auto devices = e["devices"];
  if (!devices) return r.bad(e, field, "devices is required (\"all\" or a list of GPU indices)");
  if (devices.IsScalar() && devices.Scalar() == "all") {
    out.devices = std::nullopt;
  } else if (devices.IsSequence()) {
    std::vector<unsigned> list;
    std::set<unsigned> seen;
    for (size_t i = 0; i < devices.size(); ++i) {
      unsigned v = 0;
      try {
        v = devices[i].as<unsigned>();
      } catch (const YAML::Exception&) {
        return r.bad(devices[i], fmt::format("{}.devices[{}]", field, i), "'{}' is not a GPU index", devices[i].Scalar());
      }
      if (v > kMaxIndex) return r.bad(devices[i], fmt::format("{}.devices[{}]", field, i), "GPU index {} is too large", v);
      if (!seen.insert(v).second) return r.bad(devices[i], fmt::format("{}.devices[{}]", field, i), "GPU {} is listed twice", v);
      list.push_back(v);
    }
    out.devices = std::move(list);
  } else {
    return r.bad(devices, field + ".devices", "expected \"all\" or a list of GPU indices");
  }
  const auto enabled = e["mig-enabled"];
  if (!enabled) return r.bad(e, field, "mig-enabled is required (true or false)");
  try {
    out.enabled = enabled.as<bool>();
  } catch (const YAML::Exception&) {
    return r.bad(enabled, field + ".mig-enabled", "'{}' is not true or false", enabled.Scalar());
  }
  const auto profiles = e["mig-devices"];
  if (profiles && !profiles.IsNull()) {
    if (!profiles.IsMap()) return r.bad(profiles, field + ".mig-devices", "expected a mapping of profile to count");
    for (const auto& kv : profiles) {
      const auto name = kv.first.Scalar();
      const auto f = fmt::format("{}.mig-devices.{}", field, name);
      unsigned count = 0;
      try {
        count = kv.second.as<unsigned>();
      } catch (const YAML::Exception&) {
        return r.bad(kv.second, f, "'{}' is not a count", kv.second.Scalar());
      }
      if (count > kMaxCount) return r.bad(kv.second, f, "{} instances: a GPU holds at most {}", count, kMaxCount);
      if (name.empty() || name.find_first_of(" \t/") != std::string::npos || name.find('g') == std::string::npos) {
        return r.bad(kv.first, f, "'{}' is not a MIG profile such as 1g.10gb", name);
      }
      out.profiles.emplace_back(name, count);
    }
  }
  if (!out.enabled && !out.profiles.empty()) {
    return r.bad(profiles, field + ".mig-devices", "must be empty when mig-enabled is false");
  }
  if (const auto filter = e["device-filter"]) {
    if (filter.IsSequence()) {
      for (size_t i = 0; i < filter.size(); ++i) {
        auto id = parse_pci_id(r, filter[i], fmt::format("{}.device-filter[{}]", field, i));
        if (!id) return std::unexpected(id.error());
        out.device_filter.push_back(*id);
      }
    } else {
      auto id = parse_pci_id(r, filter, field + ".device-filter");
      if (!id) return std::unexpected(id.error());
      out.device_filter.push_back(*id);
    }
  }
  return out;
}

std::string config_name(const std::string& profile) {
  std::string n = "all-" + profile;
  std::replace(n.begin(), n.end(), '+', '.');
  return n;
}

}  // namespace

Result<ConfigFile> parse_config(std::string_view text, const std::string& source) {
  auto loaded = load_yaml(text, source, kLimits);
  if (!loaded) return std::unexpected(loaded.error());
  const YAML::Node root = *loaded;
  Reader r{source};
  if (!root.IsMap()) return r.bad(root, "(top)", "expected a mapping with version and mig-configs");
  for (const auto& kv : root) {
    const auto k = kv.first.Scalar();
    if (k != "version" && k != "mig-configs") return r.bad(kv.first, "(top)", "unknown field '{}' (version, mig-configs)", k);
  }
  if (!root["version"]) return r.bad(root, "version", "missing (version: v1)");
  if (root["version"].Scalar() != "v1") return r.bad(root["version"], "version", "unknown version '{}' (v1)", root["version"].Scalar());
  const auto configs = root["mig-configs"];
  if (!configs || !configs.IsMap() || configs.size() == 0) {
    return r.bad(configs ? configs : root, "mig-configs", "expected a mapping of config names to lists of entries");
  }
  if (configs.size() > kMaxConfigs) return r.bad(configs, "mig-configs", "more than {} configs", kMaxConfigs);
  ConfigFile out;
  out.source = source;
  for (const auto& kv : configs) {
    const auto name = kv.first.Scalar();
    const auto field = "mig-configs." + name;
    if (!kv.second.IsSequence() || kv.second.size() == 0) {
      return r.bad(kv.second, field, "expected a non-empty list of entries");
    }
    if (kv.second.size() > kMaxEntries) return r.bad(kv.second, field, "more than {} entries", kMaxEntries);
    std::vector<ConfigEntry> entries;
    for (size_t i = 0; i < kv.second.size(); ++i) {
      auto e = parse_entry(r, kv.second[i], fmt::format("{}[{}]", field, i));
      if (!e) return std::unexpected(e.error());
      entries.push_back(std::move(*e));
    }
    out.configs[name] = std::move(entries);
  }
  return out;
}

std::string format_config(const ConfigFile& file) {
  std::string out = "version: v1\nmig-configs:\n";
  for (const auto& [name, entries] : file.configs) {
    out += fmt::format("  {}:\n", name);
    for (const auto& e : entries) {
      out += e.devices ? fmt::format("    - devices: [{}]\n", fmt::join(*e.devices, ", ")) : "    - devices: all\n";
      if (!e.device_filter.empty()) {
        std::vector<std::string> ids;
        for (auto id : e.device_filter) ids.push_back(fmt::format("\"0x{:08X}\"", id));
        out += fmt::format("      device-filter: [{}]\n", fmt::join(ids, ", "));
      }
      out += fmt::format("      mig-enabled: {}\n", e.enabled ? "true" : "false");
      if (e.enabled) {
        if (e.profiles.empty()) {
          out += "      mig-devices: {}\n";
        } else {
          out += "      mig-devices:\n";
          for (const auto& [p, n] : e.profiles) out += fmt::format("        \"{}\": {}\n", p, n);
        }
      }
    }
  }
  return out;
}

ConfigFile default_configs(const std::vector<Offer>& offers) {
  ConfigFile out;
  out.source = "(built-in defaults)";
  out.configs["all-disabled"] = {ConfigEntry{std::nullopt, {}, false, {}, 0}};
  if (offers.empty()) return out;
  out.configs["all-enabled"] = {ConfigEntry{std::nullopt, {}, true, {}, 0}};
  for (const auto& o : offers) {
    for (unsigned n = kComputeSlices; n > 0; --n) {
      if (plan(offers, std::vector<std::string>(n, o.name))) {
        out.configs[config_name(o.name)] = {ConfigEntry{std::nullopt, {}, true, {{o.name, n}}, 0}};
        break;
      }
    }
  }
  // all-balanced: 2 x 1g, 1 x 2g, 1 x 3g of the base profiles, the smallest memory of each size.
  auto smallest = [&](unsigned slices) -> const Offer* {
    const Offer* best = nullptr;
    for (const auto& o : offers) {
      if (o.shape->compute_slices != slices || o.shape->media_engines) continue;
      if (best == nullptr || o.memory_mib < best->memory_mib) best = &o;
    }
    return best;
  };
  const Offer *g1 = smallest(1), *g2 = smallest(2), *g3 = smallest(3);
  if (g1 && g2 && g3) {
    out.configs["all-balanced"] = {ConfigEntry{std::nullopt, {}, true, {{g1->name, 2}, {g2->name, 1}, {g3->name, 1}}, 0}};
  }
  return out;
}

Result<std::vector<Target>> select(const ConfigFile& file, const std::string& name, const std::vector<GpuId>& gpus) {
  const auto it = file.configs.find(name);
  if (it == file.configs.end()) {
    std::vector<std::string> known;
    for (const auto& [n, e] : file.configs) known.push_back(n);
    return fail(ErrorCode::kNotFound, "{}: no config named '{}' (known: {})", file.source, name, fmt::join(known, ", "));
  }
  std::map<unsigned, Target> chosen;
  for (const auto& e : it->second) {
    if (e.devices) {
      for (unsigned d : *e.devices) {
        const bool exists = std::any_of(gpus.begin(), gpus.end(), [&](const GpuId& g) { return g.index == d; });
        if (!exists) {
          return fail(ErrorCode::kInvalidArgument, "{}:{}: mig-configs.{}: devices names GPU {}, which this node does not have",
                      file.source, e.line, name, d);
        }
      }
    }
    for (const auto& g : gpus) {
      if (e.devices && std::find(e.devices->begin(), e.devices->end(), g.index) == e.devices->end()) continue;
      if (!e.device_filter.empty() &&
          std::find(e.device_filter.begin(), e.device_filter.end(), g.pci_id) == e.device_filter.end()) {
        continue;
      }
      Target t{g.index, e.enabled, {}, e.line};
      for (const auto& [p, n] : e.profiles) {
        for (unsigned k = 0; k < n; ++k) t.profiles.push_back(p);
      }
      std::sort(t.profiles.begin(), t.profiles.end());
      chosen[g.index] = std::move(t);
    }
  }
  std::vector<Target> out;
  for (auto& [i, t] : chosen) out.push_back(std::move(t));
  return out;
}

std::string describe(const Layout& l) {
  if (!l.enabled) return l.pending ? "MIG off (pending on)" : "MIG off";
  std::string out = l.pending ? "MIG on" : "MIG on (pending off)";
  const auto p = l.profiles();
  return p.empty() ? out + ": no instances" : fmt::format("{}: {}", out, fmt::join(p, ", "));
}

namespace {

bool serves(const Layout& l, const Target& t) {
  if (l.enabled != t.enabled || l.pending != t.enabled) return false;
  if (!t.enabled) return true;
  for (const auto& i : l.instances) {
    if (!i.compute_instance) return false;
  }
  return l.profiles() == t.profiles;
}

// Sets the mode of GPU `index`, resetting it through NVML when the change waits for a reset.
Result<void> mode(const NodeGpus& node, unsigned index, bool enable) {
  auto waits = set_mode(node, index, enable);
  if (!waits) return std::unexpected(waits.error());
  if (!*waits) return {};
  const auto probe = node.probe(index);
  if (auto ok = node.reset(index, probe.uuid); !ok) {
    return fail(ok.error().code, "GPU {}: MIG mode {} waits for a GPU reset, which failed: {}", index,
                enable ? "on" : "off", ok.error().message);
  }
  auto l = read_layout(node, index);
  if (!l) return std::unexpected(l.error());
  if (l->enabled != enable) {
    return fail(ErrorCode::kUnavailable, "GPU {}: MIG mode {} did not take effect after the reset", index, enable ? "on" : "off");
  }
  return {};
}

Result<void> apply_one(const NodeGpus& node, const Target& t, const std::vector<std::pair<const Offer*, unsigned>>& want,
                       const Layout& before) {
  if (!t.enabled) {
    if (before.enabled && !before.instances.empty()) {
      if (auto ok = replace_instances(node, t.index, {}); !ok) return ok;
    }
    return mode(node, t.index, false);
  }
  if (!before.enabled || !before.pending) {
    if (auto ok = mode(node, t.index, true); !ok) return ok;
  }
  return replace_instances(node, t.index, want);
}

}  // namespace

Result<std::vector<Change>> apply(const NodeGpus& node, const std::vector<Target>& targets, bool dry_run) {
  std::vector<Change> out;
  for (const auto& t : targets) {
    Change c;
    c.index = t.index;
    auto before = read_layout(node, t.index);
    if (!before) {
      c.error = before.error().message;
      out.push_back(std::move(c));
      continue;
    }
    c.before = describe(*before);
    c.after = t.enabled ? (t.profiles.empty() ? "MIG on: no instances"
                                              : fmt::format("MIG on: {}", fmt::join(t.profiles, ", ")))
                        : "MIG off";
    if (serves(*before, t)) {
      out.push_back(std::move(c));
      continue;
    }
    c.changed = true;
    std::vector<std::pair<const Offer*, unsigned>> want;
    auto offered = offers(node, t.index);
    if (!offered) {
      c.error = offered.error().message;
    } else if (offered->empty()) {
      c.error = fmt::format("GPU {}: MIG is not supported on this GPU", t.index);
    } else if (t.enabled) {
      auto placed = plan(*offered, t.profiles);
      if (placed) {
        want = std::move(*placed);
      } else {
        c.error = fmt::format("GPU {}: {}", t.index, placed.error().message);
      }
    }
    if (c.error.empty() && !dry_run) {
      if (auto ok = apply_one(node, t, want, *before); !ok) {
        c.error = ok.error().message;
      } else if (auto now = read_layout(node, t.index); !now || !serves(*now, t)) {
        c.error = fmt::format("GPU {}: read back as {}, not {}", t.index, now ? describe(*now) : now.error().message, c.after);
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

Result<ConfigFile> export_layout(const NodeGpus& node, const std::string& name) {
  auto n = node.device_count();
  if (!n) return std::unexpected(n.error());
  ConfigFile out;
  out.source = "(the node)";
  auto& entries = out.configs[name];
  for (unsigned i = 0; i < *n; ++i) {
    auto l = read_layout(node, i);
    if (!l) continue;  // not MIG capable: left out, as mig-parted does
    ConfigEntry e{std::vector<unsigned>{i}, {}, l->enabled, {}, 0};
    std::map<std::string, unsigned> counts;
    for (const auto& p : l->profiles()) ++counts[p];
    for (const auto& [p, c] : counts) e.profiles.emplace_back(p, c);
    entries.push_back(std::move(e));
  }
  return out;
}

Result<ConfigFile> load_config_file(const std::string& path) {
  auto text = read_file_limited(path, 1 << 20);
  if (!text) return std::unexpected(text.error());
  return parse_config(*text, path);
}

}  // namespace kgpu::gpu::mig
