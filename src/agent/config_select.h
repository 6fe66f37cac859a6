// Per-node choice of the sharing config from a directory of named configs (a ConfigMap with several
// keys mounted as a directory), as NVIDIA's config-manager makes it: the node label names the
// config; without the label the fallback strategies apply in order.
//
// Pure functions (no API access): the device-plugin manager passes the label it read and the
// names the directory holds. Thread safety: none needed.
//
// The order: the label's value when set (it must name a config); else the default name when set
// (it must name one); else the fallbacks in order; else an error.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace kgpu::agent {

inline constexpr const char* kDefaultConfigNodeLabel = "nvidia.com/device-plugin.config";
inline constexpr const char* kNamedFallbackConfig = "default";

enum class ConfigFallback {
  kNamed,   // the config named "default", when there is one
  kSingle,  // the only config in the directory, when there is exactly one
  kEmpty,   // no config: the built-in defaults
};

// "named,single" style list (NVIDIA's FALLBACK_STRATEGIES). Errors name the unknown entry.
Result<std::vector<ConfigFallback>> parse_config_fallbacks(const std::string& list);

struct ConfigDirOptions {
  std::string dir;
  std::string default_name;  // DEFAULT_CONFIG; "" = none
  std::string node_label = kDefaultConfigNodeLabel;
  std::vector<ConfigFallback> fallbacks{ConfigFallback::kNamed, ConfigFallback::kSingle};
};

struct ConfigChoice {
  std::string name;       // "" = the built-in defaults (fallback `empty`)
  std::string path;       // dir/name, "" with name
  std::string selected_by;  // "node-label", "default" (the default name), "named", "single" or "empty"
  bool operator==(const ConfigChoice&) const = default;
};

// Whether `name` can name a config: a plain file name of a ConfigMap key's characters
// ([-._a-zA-Z0-9]), not "." or "..", not starting with ".." (the volume's own entries).
bool valid_config_name(const std::string& name);

// The configs in `dir`: valid names of regular files (symlinks followed), sorted. Empty when the
// directory cannot be read.
std::vector<std::string> list_configs(const std::string& dir);

// The config for a node whose label (options.node_label) is `label` (nullopt or "" = absent), given
// the names in the directory. Errors (kNotFound, kInvalidArgument) name the node, the label and its
// value or the default, the directory and the names available.
Result<ConfigChoice> choose_config(const ConfigDirOptions& options, const std::string& node,
                                   const std::optional<std::string>& label, const std::vector<std::string>& available);

}  // namespace kgpu::agent
