#include "agent/config_select.h"

#include <dirent.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <sys/stat.h>

#include <algorithm>
#include <sstream>

#include "common/strings.h"

namespace kgpu::agent {

namespace {

std::string names(const std::vector<std::string>& available) {
  return available.empty() ? "none" : fmt::format("{}", fmt::join(available, ", "));
}

bool has(const std::vector<std::string>& available, const std::string& name) {
  return std::ranges::find(available, name) != available.end();
}

}  // namespace

Result<std::vector<ConfigFallback>> parse_config_fallbacks(const std::string& list) {
  std::vector<ConfigFallback> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) {
    item = trim(item);
    if (item.empty()) continue;
    if (item == "named") {
      out.push_back(ConfigFallback::kNamed);
    } else if (item == "single") {
      out.push_back(ConfigFallback::kSingle);
    } else if (item == "empty") {
      out.push_back(ConfigFallback::kEmpty);
    } else {
      return fail(ErrorCode::kInvalidArgument, "config fallback '{}' is unknown (named, single or empty)", item);
    }
  }
  return out;
}

bool valid_config_name(const std::string& name) {
  if (name.empty() || name == "." || name.starts_with("..")) return false;
  return std::ranges::all_of(name, [](unsigned char c) { return std::isalnum(c) || c == '-' || c == '_' || c == '.'; });
}

std::vector<std::string> list_configs(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    struct stat st {};
    if (!valid_config_name(name) || ::stat((dir + "/" + name).c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    out.push_back(name);
  }
  ::closedir(d);
  std::ranges::sort(out);
  return out;
}

Result<ConfigChoice> choose_config(const ConfigDirOptions& o, const std::string& node,
                                   const std::optional<std::string>& label, const std::vector<std::string>& available) {
  auto chosen = [&](const std::string& name, const char* by) {
    return ConfigChoice{name, name.empty() ? "" : o.dir + "/" + name, by};
  };
  if (label && !label->empty()) {
    if (!valid_config_name(*label)) {
      return fail(ErrorCode::kInvalidArgument,
                  "node {}: label {}=\"{}\" is not a config name (a file name in {}: letters, digits, '-', '_', '.'); "
                  "available: {}",
                  node, o.node_label, *label, o.dir, names(available));
    }
    if (!has(available, *label)) {
      return fail(ErrorCode::kNotFound, "node {}: label {}=\"{}\" names no config in {}; available: {}", node,
                  o.node_label, *label, o.dir, names(available));
    }
    return chosen(*label, "node-label");
  }
  if (!o.default_name.empty()) {
    if (!valid_config_name(o.default_name) || !has(available, o.default_name)) {
      return fail(ErrorCode::kNotFound,
                  "node {}: no label {}, and the default config \"{}\" (DEFAULT_CONFIG) is not in {}; available: {}",
                  node, o.node_label, o.default_name, o.dir, names(available));
    }
    return chosen(o.default_name, "default");
  }
  for (const auto f : o.fallbacks) {
    if (f == ConfigFallback::kNamed && has(available, kNamedFallbackConfig)) return chosen(kNamedFallbackConfig, "named");
    if (f == ConfigFallback::kSingle && available.size() == 1) return chosen(available.front(), "single");
    if (f == ConfigFallback::kEmpty) return chosen("", "empty");
  }
  return fail(ErrorCode::kNotFound,
              "node {}: no label {}, no default config (DEFAULT_CONFIG), and no fallback applies "
              "(FALLBACK_STRATEGIES: named = a config named \"{}\", single = exactly one config); configs in {}: {}",
              node, o.node_label, kNamedFallbackConfig, o.dir, names(available));
}

}  // namespace kgpu::agent
